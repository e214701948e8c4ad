"""The recall protocol (`python -m worldlab table recall`): when the player comes back to a
place, does the world show what was there, where only memory can know it?

Open loop from the first chunk (the revisit protocol, `revisit.py`) a world's memory holds
its own drifted frames, so a score there mixes drift with recall. Here the outbound part is
teacher forced: every chunk before the first recall frame's chunk is the engine's (the KV
window and every memory, the 3D cache too, hold the engine's own frames), and the return
chunks are then generated open loop (`generation.generate` with the world's memory).

    recall frame j   a return frame (`revisit.return_pairs`: an outbound frame i* at least
                     min_gap frames earlier covers at least half of it) that the frames the
                     KV window holds when j's chunk is made (the `window_frames` before it)
                     cover by less than MAX_WINDOW_COVER: only memory can know it.

A walk without recall frames is left out and counted; walks are drawn from consecutive
seeds until `walks` have some. Each walk's score is the mean over its recall frames, so
paired differences between worlds are walk by walk. References on the same frames: the
oracle (the engine's frame i* warped into pose j with the engine's depth, through the
world's autoencoder), copy (frame i* unwarped, through the autoencoder), repeat-last and
warp-last (the last teacher-forced frame, as it is and warped into pose j), and the
autoencoder (the engine's frame j through it).

Shape legend: T frames of a walk, f frames per chunk, n recall frames.
"""

from __future__ import annotations

import time

import numpy as np

from ..metrics import frame_psnr
from ..pretrained import World
from ..threads import threads_within
from ..viz import frame_grid
from .baselines import repeat_baseline, warp_baseline
from .generation import generate
from .revisit import (MIN_GAP, MIN_OVERLAP, POLICIES, PSNR_MAX, coverage, oracle_frames,
                      return_pairs, through_autoencoder)
from .protocols import heldout_episodes

MAX_WINDOW_COVER = 0.2  # the window's frames may cover a recall frame by less than this
REFERENCES = ("oracle", "copy", "repeat_last", "warp_last", "autoencoder")


def recall_frames(episode, window_frames: int, f: int, min_gap: int = MIN_GAP,
                  min_overlap: float = MIN_OVERLAP,
                  max_window: float = MAX_WINDOW_COVER) -> list[tuple[int, int, float]]:
    """[(j, i*, coverage)] of the episode's recall frames (module docstring): its return
    frames whose chunk's `window_frames` predecessors cover them by less than
    `max_window`."""
    if not 0 <= max_window <= 1:
        raise ValueError(f"max_window must be a share in [0, 1], got {max_window!r}")
    if min_gap <= window_frames:
        raise ValueError(f"min_gap ({min_gap}) must reach past the window ({window_frames} "
                         f"frames): a frame in the window is not recalled")
    out = []
    for j, i, cov in return_pairs(episode, min_gap, min_overlap):
        begin = j // f * f  # j's chunk: the window holds the frames before it
        window = range(max(0, begin - window_frames), begin)
        if coverage(episode, j, window).max(initial=0.0) < max_window:
            out.append((j, i, cov))
    return out


def recall_walks(n: int, frames: int, window_frames: int, f: int, engine: str,
                 maps: tuple[str, ...], seed: int, max_tries: int = 4, **engine_opts
                 ) -> tuple[list, list, dict]:
    """`n` held-out revisit walks of `engine` (the two revisit players alternating, random
    starts over `maps`, or the engine's own worlds when empty) that have recall frames, from
    consecutive seeds: (walks, their recall frames, {"seeds_tried", "left_out": seeds
    without recall frames}). Fails naming the seeds when `max_tries` x n seeds do not give
    n."""
    walks, pairs, left_out = [], [], []
    for k in range(max_tries * n):
        if len(walks) == n:
            break
        ep = heldout_episodes(engine, 1, frames, 64,
                              policy=POLICIES[k % len(POLICIES)], start="random",
                              maps=maps or None, seed=seed + k, **engine_opts)[0]
        found = recall_frames(ep, window_frames, f) if len(ep) == frames else []
        if found:
            walks.append(ep)
            pairs.append(found)
        else:
            left_out.append(seed + k)
    if len(walks) < n:
        raise ValueError(f"only {len(walks)} of seeds {seed}-{seed + max_tries * n - 1} gave "
                         f"a walk with recall frames; wanted {n} (longer walks return more)")
    return walks, pairs, {"seeds_tried": len(walks) + len(left_out), "left_out": left_out}


def _walk_mean(frames: np.ndarray, episode, js: list[int]) -> float:
    return float(np.minimum(frame_psnr(frames, episode.rgb[js]), PSNR_MAX).mean())


def world_recall(world: World, walks, pairs, steps: int | None = None, seed: int = 0) -> dict:
    """One world on the recall walks: `recall_psnr_per_walk`, its mean `recall_psnr`, the
    generated chunks' wall time `ms_per_chunk` (memory, sampling, decoding and the 3D cache's
    fusing) and the memory tokens it reads per frame."""
    per_walk, ms = [], []
    for ep, found in zip(walks, pairs):
        js = [j for j, _, _ in found]
        start, gen, chunk_ms = _returns(world, ep, found, steps, seed, time.perf_counter)
        ms.append(chunk_ms)
        per_walk.append(_walk_mean(gen[[j - start for j in js]], ep, js))
    m = world.config.model
    return {"recall_psnr": float(np.mean(per_walk)), "recall_psnr_per_walk": per_walk,
            "ms_per_chunk": float(np.median(ms)),
            "memory_tokens_per_frame": m.memory_tokens / m.chunk_frames,
            "sampling_steps": steps or world.config.sample.steps}


def timed_worlds(worlds: dict[str, World], walks, pairs, seed: int = 0) -> dict[str, float]:
    """{name: median CPU ms per generated chunk} of each world making the return chunks of
    `walks` as `world_recall` does, on one thread, the worlds taking turns walk by walk
    (their order rotating each walk). CPU time on one thread is what a chunk costs a core
    whatever else the machine runs: a fair ratio on a shared machine, where wall time (a
    scoring job's, beside whichever jobs share its cores) also measures the neighbours."""
    names, ms = list(worlds), {n: [] for n in worlds}
    with threads_within(1):
        for k, (ep, found) in enumerate(zip(walks, pairs)):
            for n in names[k % len(names):] + names[:k % len(names)]:
                ms[n].append(_returns(worlds[n], ep, found, None, seed, time.process_time)[2])
    return {n: float(np.median(v)) for n, v in ms.items()}


def _returns(world: World, ep, found, steps: int | None, seed: int, clock
             ) -> tuple[int, np.ndarray, float]:
    """(start, frames [start, end), ms per chunk by `clock`) of the walk's return chunks,
    generated from the first recall frame's chunk on after the true frames before it."""
    f = world.chunk_frames
    start = found[0][0] // f * f
    t0 = clock()
    gen = generate(world, ep, 0, start, len(ep) // f * f, steps=steps, seed=seed)
    return start, gen, 1e3 * (clock() - t0) / (len(gen) // f)


def recall_strip(worlds: dict[str, World], walk, found, rows: int = 3, seed: int = 0
                 ) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The moment of return on one recall walk, as `world_recall` generates it: one row per
    recall frame j (the `rows` with the widest gaps to their outbound frame i*), columns the
    engine | each world in order | the oracle (frame i* warped into pose j, through the
    first world's autoencoder). Returns (uint8 image, [(j, i*)] of the rows)."""
    if not worlds or not found:
        raise ValueError(f"a recall strip needs worlds and recall frames, got {len(worlds)} "
                         f"worlds and {len(found)} recall frames")
    f = next(iter(worlds.values())).chunk_frames
    picks = sorted(sorted(found, key=lambda p: p[0] - p[1])[-rows:])
    start = found[0][0] // f * f
    gen = {n: generate(w, walk, 0, start, len(walk) // f * f, seed=seed)
           for n, w in worlds.items()}
    oracle = through_autoencoder(next(iter(worlds.values())), oracle_frames(walk, picks))
    cells = [frame for k, (j, _, _) in enumerate(picks)
             for frame in (walk.rgb[j], *(g[j - start] for g in gen.values()), oracle[k])]
    grid = frame_grid(np.stack(cells), cols=len(worlds) + 2, pad=2)
    return grid, [(j, i) for j, i, _ in picks]


def reference_recall(world: World, walks, pairs) -> dict:
    """{reference: per-walk mean PSNR on the recall frames} (REFERENCES), through `world`'s
    autoencoder where the module docstring says so."""
    f, out = world.chunk_frames, {name: [] for name in REFERENCES}
    for ep, found in zip(walks, pairs):
        js, i = [j for j, _, _ in found], [i for _, i, _ in found]
        last = js[0] // f * f - 1  # the last teacher-forced frame
        out["oracle"].append(_walk_mean(through_autoencoder(world, oracle_frames(ep, found)),
                                        ep, js))
        out["copy"].append(_walk_mean(through_autoencoder(world, ep.rgb[i]), ep, js))
        out["repeat_last"].append(_walk_mean(repeat_baseline(ep.rgb[last], len(js)), ep, js))
        out["warp_last"].append(_walk_mean(warp_baseline(ep, last, js), ep, js))
        out["autoencoder"].append(_walk_mean(through_autoencoder(world, ep.rgb[js]), ep, js))
    return out
