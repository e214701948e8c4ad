"""Open-loop generation of a whole episode with a world's memory (`world.config.memory`),
and its streaming cost: what the revisit protocol and the memory ablations score.

The first chunk comes from the engine; every later chunk is generated from the model's own
previous chunks (the KV window) plus what its memory selects: the sink, chunks retrieved
by field-of-view overlap, the 3D cache rendered into the new chunk's cameras
(`memory.stream.Stream`). A world without memory streams exactly as
`generation.generate` does.

Shape legend: T frames of an episode, f frames per chunk, h w frame size.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..config import check_sampling_steps
from ..memory.stream import Stream, world_stream
from ..model.sampler import chunk_conditions
from ..pretrained import World
from .generation import episode_conditions
from .protocols import chunk_noise, sync


def memory_stream(world: World, episode, depth_head=None) -> Stream:
    """A Stream of `world` with its memory for the cameras of `episode` (its intrinsics
    K), with the world's own depth head unless `depth_head` is given."""
    return world_stream(world, episode.K[0], depth_head=depth_head)


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
    stream.append_truth(truth0, first, episode.rgb[:f], engine_depth(episode, 0, f))
    frames, ms, read = [episode.rgb[:f]], [], []
    for j in range(1, T // f):
        cond = chunk_conditions(j, f, actions, c2w, captions)
        t0 = time.perf_counter()
        x = stream.step(chunk_noise(world, g), cond, steps)
        sync(world.device)
        ms.append(1e3 * (time.perf_counter() - t0))
        frames.append(stream.show(world.decode(x), engine_depth(episode, j * f, f)))
        read.append(stream.last_memory)
        if progress is not None:
            progress(1)
    return {"frames": np.concatenate(frames), "chunk_ms": ms, "memory_chunks": read}


def engine_depth(episode, start: int, f: int):
    """The engine's depth of frames [start, start + f), or None when the episode has none
    (only `cache3d="oracle"` reads it)."""
    return None if episode.depth is None else episode.depth[start:start + f]


def _cost_stream(world: World, episode, steps: int | None):
    """A stream of `world` driven by the episode's controls played back and forth (so a long
    stream keeps revisiting), started on its first chunk: a function chunk(k) that streams
    chunk k (memory + sampling + append + decode + show) and returns (ms, memory tokens
    read)."""
    f, steps = world.chunk_frames, steps or world.config.sample.steps
    n = len(episode) // f
    order = np.concatenate([np.arange(n), np.arange(n - 2, 0, -1)])  # there and back
    actions, c2w, captions = episode_conditions(world, episode, 0, n * f)
    stream = memory_stream(world, episode)
    g = torch.Generator().manual_seed(0)
    stream.append_truth(world.encode(episode.rgb[:f]),
                        chunk_conditions(0, f, actions, c2w, captions), episode.rgb[:f],
                        engine_depth(episode, 0, f))

    def chunk(k: int) -> tuple[float, int]:
        j = int(order[k % len(order)])
        cond = chunk_conditions(j, f, actions, c2w, captions)
        t0 = time.perf_counter()
        x = stream.step(chunk_noise(world, g), cond, steps)
        stream.show(world.decode(x), engine_depth(episode, j * f, f))
        sync(world.device)
        return 1e3 * (time.perf_counter() - t0), stream.last_tokens
    return chunk


@torch.no_grad()
def stream_costs(worlds: dict[str, World], episode, chunks: int = 100,
                 steps: int | None = None, progress=None) -> dict[str, dict]:
    """Per-chunk cost of streaming `chunks` chunks with each world's memory, the worlds side
    by side (a chunk of each in turn, so whatever else the machine does falls on every world
    alike), summarised by `cost_summary`. `progress(1)` ticks each chunk streamed."""
    if chunks < 12:
        raise ValueError(f"chunks must be at least 12 (two ends of 10 after a warm-up chunk), "
                         f"got {chunks}")
    runs = {name: _cost_stream(world, episode, steps) for name, world in worlds.items()}
    ms = {name: [] for name in worlds}
    tokens = {name: [] for name in worlds}
    for k in range(1, chunks + 1):
        for name, chunk in runs.items():
            t, n = chunk(k)
            ms[name].append(t)
            tokens[name].append(n / worlds[name].chunk_frames)
            if progress is not None:
                progress(1)
    return cost_summary(ms, tokens)


def cost_summary(ms: dict[str, list], tokens_per_frame: dict[str, list]) -> dict[str, dict]:
    """Streaming costs from each world's per-chunk times `ms` (worlds streamed side by side,
    the first the baseline) and memory tokens read per frame:
    - `ms_per_chunk`: the median after 2 warm-up chunks;
    - `cost_ratio_chunk100_chunk2`: chunk 100 over chunk 2, as medians of the last 10 and of
      chunks 2-11;
    - `ms_vs_first`: the median ratio of each chunk's time to the first world's same chunk
      (streamed just before it);
    - `growth_vs_first`: that ratio's growth, its median over the last 10 chunks over its
      median over chunks 2-11. This is the growth a memory adds over the first world's, with
      the machine's speed at each moment cancelled chunk by chunk; a shared host's speed
      swings by a quarter within seconds, which the raw ratio keeps;
    - `memory_tokens_per_frame` (mean of the last 10), `chunks`, and `chunk_ms`, every time.
    """
    ms = {name: np.asarray(times, float) for name, times in ms.items()}
    first = next(iter(ms.values()))
    for name, m in ms.items():
        if m.shape != first.shape or len(m) < 12 or name not in tokens_per_frame:
            raise ValueError(f"ms[{name!r}] must hold one time per chunk for the same 12 or "
                             f"more chunks as the first world ({len(first)}), got {len(m)}, "
                             f"and tokens_per_frame one entry per chunk too")

    def growth(m):
        return float(np.median(m[-10:]) / np.median(m[1:11]))
    out = {}
    for name, m in ms.items():
        vs_first = m / first
        out[name] = {"ms_per_chunk": float(np.median(m[2:])),
                     "cost_ratio_chunk100_chunk2": growth(m),
                     "growth_vs_first": growth(vs_first),
                     "ms_vs_first": float(np.median(vs_first[2:])),
                     "memory_tokens_per_frame": float(np.mean(tokens_per_frame[name][-10:])),
                     "chunks": len(m), "chunk_ms": [round(float(t), 2) for t in m]}
    return out
