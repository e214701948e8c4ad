"""Where a chunk's time goes: `python -m worldlab bench profile [--checkpoint DIR]
[--chunks N] [--twin]`, on the streaming step of `protocols.make_chunk`.

One chunk of play is: the twin engine's f steps (with `twin`), the sampler's steps through
the transformer (`forward_chunk` per step, the first one also computing the K/V of the
chunk before: a deferred `append_chunk`), then the decode of its f
frames. Forward pre/post hooks on every block's self-attention, cross-attention and MLP add
up their wall time; the components, in ms per chunk, are

    attention   self + cross attention (their projections, q/k norms, RoPE, SDPA)
    mlp         the blocks' MLPs
    other       the rest of the transformer calls: AdaLN modulation, layer norms,
                residuals, the time/pose/action/text embeddings, patching, the input checks
                and the sampler's loop around them
    decode      `World.decode` of the chunk's frames
    engine      the twin's f steps (0 without a twin)
    python      the rest of the wall time: conditioning tensors, noise, the twin's
                observations stacked

`python` is computed per chunk as the wall time less the others, so the components sum to
the wall time of each chunk; the table shows medians over chunks, which sum to about the
median wall time. The first `window_chunks` chunks fill the KV cache and are not counted, so
every counted chunk attends to a full window. Hooks cannot see inside a compiled trunk, so a
world loaded with `sample.compile` is refused; the other switches are profiled as loaded.

Shape legend: b batch, f frames per chunk, c latent channels, h w latent height/width,
a action width, k text tokens, e text width.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import defaultdict
from contextlib import contextmanager

import numpy as np
import torch

from ..camera import ACTION_WIDTH, Action
from ..engines import make_engine
from ..engines.policies import WALK
from ..pretrained import World, load_world, resolve_checkpoint
from .protocols import chunk_noise, make_chunk, speed_stream, still_conditions, sync
from .report import print_table

COMPONENTS = ("attention", "mlp", "other", "decode", "engine", "python")


# ----------------------------------------------------------------------------------------
# The profile
# ----------------------------------------------------------------------------------------


@contextmanager
def block_timers(world: World, totals: defaultdict):
    """Hooks adding the seconds of each block's attention and MLP to totals[label]."""
    handles = []

    def timer(label):
        start = []

        def pre(module, args):
            sync(world.device)
            start.append(time.perf_counter())

        def post(module, args, out):
            sync(world.device)
            totals[label] += time.perf_counter() - start.pop()
        return pre, post

    for block in world.model.blocks:
        for label, module in (("attention", block.attn), ("attention", block.cross),
                              ("mlp", block.mlp)):
            pre, post = timer(label)
            handles += [module.register_forward_pre_hook(pre),
                        module.register_forward_hook(post)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


class _Twin:
    """The engine the world was trained on: its first chunk (reset, then no-ops, as a
    session starts) is the context; every later chunk walks `WALK`."""

    def __init__(self, world: World):
        self.f, self.steps = world.chunk_frames, 0
        self.engine = make_engine(world.config.data.engine, size=world.size)

    def first_chunk(self) -> tuple[np.ndarray, np.ndarray]:
        """Frames (f, h, w, 3) and poses (f, 4, 4) of the first chunk."""
        obs = [self.engine.reset(seed=0)] + [self.engine.step(Action())
                                             for _ in range(self.f - 1)]
        return np.stack([o.rgb for o in obs]), np.stack([o.c2w for o in obs])

    def chunk(self) -> tuple[np.ndarray, np.ndarray]:
        """Actions (f, a) and poses (f, 4, 4) of the next f steps."""
        actions = [WALK[(self.steps + i) % len(WALK)] for i in range(self.f)]
        self.steps += self.f
        obs = [self.engine.step(a) for a in actions]
        return np.stack([a.to_vector() for a in actions]), np.stack([o.c2w for o in obs])


def _conditions(world: World, actions: np.ndarray, c2w: np.ndarray, text) -> dict:
    """A chunk's actions (f, a) and poses (f, 4, 4) as (1, f, ...) tensors, with its text."""
    dev = world.device
    return {"actions": torch.as_tensor(actions, dtype=torch.float32, device=dev)[None],
            "c2w": torch.as_tensor(c2w, dtype=torch.float32, device=dev)[None], "text": text}


def _timed_chunk(world: World, stream, cond: dict, noise, twin: _Twin | None) -> dict:
    """Seconds of each of COMPONENTS (and the wall time) for one chunk."""
    totals = defaultdict(float)
    t0 = time.perf_counter()
    stepped = twin.chunk() if twin is not None else None
    engine = time.perf_counter() - t0
    if stepped is not None:
        cond = _conditions(world, *stepped, cond["text"])
    with block_timers(world, totals):
        _, transformer, decode = make_chunk(world, stream, noise, cond)
    wall = time.perf_counter() - t0
    return {"attention": totals["attention"], "mlp": totals["mlp"],
            "other": transformer - totals["attention"] - totals["mlp"], "decode": decode,
            "engine": engine, "python": wall - transformer - decode - engine, "wall": wall}


def profile_world(world: World, chunks: int = 8, twin: bool = False, seed: int = 0) -> dict:
    """Milliseconds per chunk of each of COMPONENTS and of the wall time: medians over
    `chunks` chunks after the cache is full (see the module docstring)."""
    rows = profile_chunks(world, chunks, twin, seed)
    return {k: 1e3 * float(np.median([r[k] for r in rows])) for k in (*COMPONENTS, "wall")}


@torch.no_grad()
def profile_chunks(world: World, chunks: int = 8, twin: bool = False, seed: int = 0
                   ) -> list[dict]:
    """Seconds of each of COMPONENTS and of the wall time, per chunk, for `chunks` chunks
    after the cache is full: on each chunk the components sum to its wall time."""
    if world.config.sample.compile:
        raise ValueError("bench profile hooks the eager transformer; load the world with "
                         "sample.compile=False")
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"chunks must be an int >= 1, got {chunks!r}")
    cond, stream = still_conditions(world), speed_stream(world)
    g, fill = torch.Generator().manual_seed(seed), world.model.config.window_chunks
    eng = _Twin(world) if twin else None
    try:
        if eng is not None:  # the engine's first chunk is the context, as in a session
            rgb, c2w = eng.first_chunk()
            stream.append_truth(world.encode(rgb), _conditions(
                world, np.zeros((len(c2w), ACTION_WIDTH)), c2w, cond["text"]))
        rows = [_timed_chunk(world, stream, cond, chunk_noise(world, g), eng)
                for _ in range(fill + chunks)][fill:]
    finally:
        if eng is not None:
            eng.engine.close()
    return rows


def bench_profile(checkpoint=None, chunks: int = 8, twin: bool = False,
                  device: str = "auto") -> dict:
    """Profile a world (the shipped one by default) per chunk; prints the table."""
    world = load_world(resolve_checkpoint(checkpoint), device=device)
    ms = profile_world(world, chunks, twin)
    shown = {**{k: ms[k] for k in COMPONENTS}, "sum": sum(ms[k] for k in COMPONENTS),
             "wall (median)": ms["wall"]}
    rows = [{"component": k, "ms_per_chunk": v, "share_%": 100 * v / ms["wall"]}
            for k, v in shown.items()]
    print_table(rows, f"where a chunk's time goes ({'with' if twin else 'no'} twin engine, "
                      f"{world.config.sample.steps} steps, {torch.get_num_threads()} threads)")
    return {"ms_per_chunk": ms, "chunks": chunks, "twin": twin,
            "engine": world.config.data.engine if twin else None,
            "sample": dataclasses.asdict(world.config.sample), "checkpoint": str(world.path),
            "device": str(world.device), "threads": torch.get_num_threads(),
            "load_average_1min": os.getloadavg()[0]}  # other jobs slow every component
