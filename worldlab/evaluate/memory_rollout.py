"""Open-loop generation of a whole episode with a world's memory (`world.config.memory`),
and its streaming cost: what the revisit protocol and the memory ablations score.

The first chunk comes from the engine; every later chunk is generated from the model's own
previous chunks (the KV window) plus what its memory selects: the sink, chunks retrieved
by field-of-view overlap, the 3D cache rendered into the new chunk's cameras
(`memory.stream.MemoryStream`). A world without memory streams exactly as
`protocols.generate` does.

Shape legend: T frames of an episode, f frames per chunk, h w frame size.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..config import check_sampling_steps
from ..memory.stream import MemoryStream
from ..model.sampler import chunk_conditions
from ..pretrained import World
from .generation import episode_conditions
from .protocols import chunk_noise, sync


def memory_stream(world: World, episode, depth_head=None) -> MemoryStream:
    """A MemoryStream of `world` for the cameras of `episode` (its intrinsics K), with the
    world's own depth head unless `depth_head` is given."""
    return MemoryStream(world.model, world.ae, world.config.memory, world.config.sample,
                        K=episode.K[0], depth_head=depth_head or world.depth_head)


@torch.no_grad()
def open_loop(world: World, episode, seed: int = 0, steps: int | None = None,
              progress=None, depth_head=None) -> dict:
    """The episode generated open loop from its first chunk: `frames` uint8 (T, h, w, 3)
    (the first chunk the engine's), `chunk_ms` (n - 1,) ms per generated chunk (memory
    selection + sampling + append; decode excluded), `memory_chunks` the chunks each
    generated chunk read from memory. With memory.cache3d="oracle" the engine's depth of
    past frames is fused (never of the chunk being generated)."""
    f, steps = world.chunk_frames, steps or world.config.sample.steps
    check_sampling_steps(world.config, steps)
    T = len(episode) // f * f
    actions, c2w, captions = episode_conditions(world, episode, 0, T)
    stream = memory_stream(world, episode, depth_head)
    g = torch.Generator().manual_seed(seed)
    first = chunk_conditions(0, f, actions, c2w, captions)
    truth0 = world.encode(episode.rgb[:f])
    stream.start(truth0, first, episode.rgb[:f], _depth(episode, 0, f))
    frames, ms, read = [episode.rgb[:f]], [], []
    for j in range(1, T // f):
        cond = chunk_conditions(j, f, actions, c2w, captions)
        t0 = time.perf_counter()
        x = stream.step(chunk_noise(world, g), cond, steps)
        sync(world.device)
        ms.append(1e3 * (time.perf_counter() - t0))
        rgb = world.decode(x)
        stream.observe(rgb, _depth(episode, j * f, f))
        frames.append(rgb)
        read.append(stream.last_memory)
        if progress is not None:
            progress(1)
    return {"frames": np.concatenate(frames), "chunk_ms": ms, "memory_chunks": read}


def _depth(episode, start: int, f: int):
    """The engine's depth of frames [start, start + f), or None when the episode has none
    (only `cache3d="oracle"` reads it)."""
    return None if episode.depth is None else episode.depth[start:start + f]


@torch.no_grad()
def stream_cost(world: World, episode, chunks: int = 100, steps: int | None = None,
                depth_head=None) -> dict:
    """Per-chunk cost of streaming `chunks` chunks with memory, driven by the episode's
    controls played back and forth (so a long stream keeps revisiting): median ms per chunk
    (memory + sampling + append + decode + observe) after 2 warm-up chunks, and chunk 100
    over chunk 2 as medians of 5 chunks on either side; memory tokens read per frame."""
    f, steps = world.chunk_frames, steps or world.config.sample.steps
    n = len(episode) // f
    order = np.concatenate([np.arange(n), np.arange(n - 2, 0, -1)])  # there and back
    T = n * f
    actions, c2w, captions = episode_conditions(world, episode, 0, T)
    stream = memory_stream(world, episode, depth_head)
    g = torch.Generator().manual_seed(0)
    stream.start(world.encode(episode.rgb[:f]), chunk_conditions(0, f, actions, c2w, captions),
                 episode.rgb[:f], _depth(episode, 0, f))
    ms, tokens = [], []
    for k in range(1, chunks + 1):
        j = int(order[k % len(order)])
        cond = chunk_conditions(j, f, actions, c2w, captions)
        t0 = time.perf_counter()
        x = stream.step(chunk_noise(world, g), cond, steps)
        stream.observe(world.decode(x), _depth(episode, j * f, f))
        sync(world.device)
        ms.append(1e3 * (time.perf_counter() - t0))
        tokens.append(stream.last_tokens)
    ms = np.array(ms)
    return {"ms_per_chunk": float(np.median(ms[2:])),
            "cost_ratio_chunk100_chunk2": float(np.median(ms[-5:]) / np.median(ms[1:6])),
            "memory_tokens_per_frame": float(np.mean(tokens[-10:])) / f,
            "chunks": chunks}
