"""The revisit protocol (`python -m worldlab eval --suite revisit`): does a world show the
same place again when the player comes back to it, long after it left the KV window?

Held-out walks of the two revisit players (`leave_and_return` and `asymmetric_return`,
alternating; DOOM, random starts over the level, monsters invulnerable) are generated open
loop from their first chunk with each world's memory (`memory_rollout.open_loop`). Which
frames are revisits follows from the engine's own depth and poses alone:

    return frame j   a frame whose view overlaps an earlier "outbound" frame i, j - i >=
                     min_gap (24: well outside a 12-frame KV window), by at least
                     min_overlap (half): the share of frame j's pixels with finite depth
                     that frame i sees unoccluded (`cache3d.backward_warp` with i's depth).
                     Its match i* is the outbound frame of largest coverage (ties: the
                     earliest). Frames of the first chunk are never scored.

Scores of a world on the return frames: PSNR and SSIM against the engine, and
self-consistency: the world's own frame i* warped into pose j with the engine's depth
against its own frame j, PSNR over the covered pixels only (a world that remembers what it
drew agrees with itself, even where both frames are wrong). Beside them the PSNR of every
generated frame and the streaming cost with memory (`memory_rollout.stream_costs`,
every world side by side).

References scored on the same frames:

    oracle       the engine's frame i* warped into pose j with the engine's depth, through
                 the world's autoencoder: the ceiling any memory can reach
    copy         the engine's frame i*, unwarped, through the autoencoder
    repeat       the context chunk's last frame, forever (`baselines.repeat_baseline`)
    autoencoder  the engine's frames through the autoencoder (the first chunk as it is)

Means pool every return frame of every episode; a bootstrap over episodes (1000 resamples,
seeded) gives 95% intervals of the pooled return and all-frames PSNR. A frame's PSNR is
capped at PSNR_MAX: a frame shown again exactly (repeat-last on a return to its pose, a
world that copies itself) would be infinite and make any mean over it so.

Shape legend: T frames of an episode, f frames per chunk, h w frame size, n return frames,
m candidate outbound frames, p pixels.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .. import camera
from ..memory.cache3d import backward_warp
from ..metrics import frame_psnr, frame_ssim
from ..pretrained import World
from .baselines import repeat_baseline
from .memory_rollout import open_loop, stream_costs
from .stats import bootstrap_interval, combine_seeds

MIN_GAP, MIN_OVERLAP = 24, 0.5
POLICIES = ("leave_and_return", "asymmetric_return")  # episode k plays POLICIES[k % 2]
REFERENCES = ("oracle", "copy", "repeat", "autoencoder")
RESAMPLES = 1000  # bootstrap resamples of the episodes
OCCLUSION_TOL = 0.05  # relative depth disagreement that hides a pixel (backward_warp's)
SEED_KEYS = ("return_psnr", "return_ssim", "self_consistency_psnr", "all_frames_psnr")
AE_BATCH = 32  # frames per autoencoder pass
PSNR_MAX = 60.0  # dB: an RMSE of a quarter grey level; what an exact frame scores


# ----------------------------------------------------------------------------------------
# Return frames, from the engine's depth and poses
# ----------------------------------------------------------------------------------------


def coverage(episode, j: int, sources) -> np.ndarray:
    """The share of frame j's pixels with finite depth that each frame i of `sources` (m,)
    sees unoccluded, all at once: (m,). The same test as `cache3d.backward_warp(rgb_i,
    depth_j, c2w_i, c2w_j, K_j, src_depth=depth_i, src_K=K_i)`'s valid mask."""
    src = np.asarray(list(sources), dtype=np.int64)
    depth = episode.depth[j]
    ok = np.isfinite(depth) & (depth > 0)  # (h, w)
    if len(src) == 0 or not ok.any():
        return np.zeros(len(src))
    hs, ws = episode.depth.shape[1:]
    uv = camera.pixel_grid(*depth.shape)[ok]  # (p, 2)
    points = camera.unproject(uv, depth[ok], episode.K[j], episode.c2w[j])  # (p, 3)
    R, t = episode.c2w[src, :3, :3], episode.c2w[src, :3, 3]  # (m, 3, 3), (m, 3)
    cam = np.einsum("pk,mkc->mpc", points, R) - np.einsum("mk,mkc->mc", t, R)[:, None]
    uvw = np.einsum("mpc,mdc->mpd", cam, episode.K[src])  # (m, p, 3)
    z = cam[..., 2]  # (m, p)
    with np.errstate(divide="ignore", invalid="ignore"):
        u, v = uvw[..., 0] / uvw[..., 2], uvw[..., 1] / uvw[..., 2]
        inside = (z > 1e-6) & (u >= 0) & (u < ws) & (v >= 0) & (v < hs)
    col = np.where(inside, u, 0).astype(np.int64)  # floor: u >= 0 where inside
    row = np.where(inside, v, 0).astype(np.int64)
    d = episode.depth[src[:, None], row, col]  # (m, p) the source's own depth there
    with np.errstate(invalid="ignore"):
        seen = inside & (np.abs(d - z) <= OCCLUSION_TOL * z)
    return seen.sum(axis=1) / ok.sum()


def _check_pairs(episode, min_gap, min_overlap) -> None:
    if isinstance(min_gap, bool) or not isinstance(min_gap, (int, np.integer)) or min_gap < 1:
        raise ValueError(f"min_gap must be a positive number of frames, got {min_gap!r}")
    if not 0 < min_overlap <= 1:
        raise ValueError(f"min_overlap must be a share in (0, 1], got {min_overlap!r}")
    if episode.depth is None:
        raise ValueError("finding return frames needs the engine's depth; the episode has "
                         "none")


def return_pairs(episode, min_gap: int = MIN_GAP, min_overlap: float = MIN_OVERLAP,
                 start: int = 0, frames: int | None = None) -> list[tuple[int, int, float]]:
    """The return frames of an episode: [(j, i*, coverage)] for frames j in [start, frames)
    (default: all) whose best-covering outbound frame i* <= j - min_gap covers at least
    `min_overlap` of their pixels with finite depth (`coverage`; ties: the earliest i)."""
    _check_pairs(episode, min_gap, min_overlap)
    T = len(episode) if frames is None else min(frames, len(episode))
    pairs = []
    for j in range(max(start, min_gap), T):
        cov = coverage(episode, j, range(j - min_gap + 1))  # (j - min_gap + 1,)
        i = int(np.argmax(cov))  # the first of equal maxima
        if cov[i] >= min_overlap:
            pairs.append((j, i, float(cov[i])))
    return pairs


def covered_frames(episode, frames, min_gap: int = MIN_GAP, min_overlap: float = MIN_OVERLAP,
                   batch: int = 64) -> np.ndarray:
    """The frames j of `frames` that some frame i <= j - min_gap covers by at least
    `min_overlap` (`coverage`): the frames `return_pairs` keeps, without finding the best
    i. Earlier frames are tried `batch` at a time, nearest first, and a frame stops at the
    first batch that covers it: a loop walk's late frame is usually covered by its last lap,
    so this costs a few batches where `return_pairs` scores every earlier frame."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive number of frames, got {batch!r}")
    _check_pairs(episode, min_gap, min_overlap)
    found = []
    for j in frames:
        for stop in range(j - min_gap + 1, 0, -batch):  # candidates [stop - batch, stop)
            if coverage(episode, j, range(max(stop - batch, 0), stop)).max() >= min_overlap:
                found.append(j)
                break
    return np.array(found, dtype=np.int64)


def warp_pairs(frames: np.ndarray, episode, pairs) -> tuple[np.ndarray, np.ndarray]:
    """Each frame i* of `frames` (T, h, w, 3) warped into its return pose j with the
    engine's depth (`backward_warp`, occlusion tested with i*'s depth): rgb (n, h, w, 3)
    uint8 and the covered pixels (n, h, w) bool."""
    d, c2w, K = episode.depth, episode.c2w, episode.K
    out = [backward_warp(frames[i], d[j], c2w[i], c2w[j], K[j], src_depth=d[i], src_K=K[i])
           for j, i, _ in pairs]
    return np.stack([rgb for rgb, _ in out]), np.stack([mask for _, mask in out])


# ----------------------------------------------------------------------------------------
# Scores of one episode
# ----------------------------------------------------------------------------------------


def masked_psnr(pred, true, mask) -> np.ndarray:
    """PSNR (dB, 0-255 frames) per frame of uint8 frames (t, h, w, 3) over the pixels of
    `mask` (t, h, w) only, all three channels: (t,); nan where a mask is empty, inf where
    the covered pixels agree exactly."""
    pred, true, mask = np.asarray(pred), np.asarray(true), np.asarray(mask)
    if pred.shape != true.shape or pred.ndim != 4 or mask.shape != pred.shape[:3]:
        raise ValueError(f"masked_psnr needs frames (t, h, w, 3) and a mask (t, h, w), got "
                         f"{pred.shape}, {true.shape} and {mask.shape}")
    err = (pred.astype(np.float64) - true.astype(np.float64)) ** 2  # (t, h, w, 3)
    n = 3 * mask.sum(axis=(1, 2))  # (t,)
    with np.errstate(divide="ignore", invalid="ignore"):
        mse = (err * mask[..., None]).sum(axis=(1, 2, 3)) / n
        return 10 * np.log10(255.0 ** 2 / mse)


def stream_scores(frames: np.ndarray, episode, pairs, f: int) -> dict:
    """Per-frame scores of a whole stream `frames` (T, h, w, 3) of an episode: `frame_psnr`
    (T,) (nan for the first chunk's f frames), and on the n return frames `return_psnr`,
    `return_ssim` and `self_consistency_psnr` (n,), `return_index` (n,) their frames j.
    PSNRs in dB, at most PSNR_MAX."""
    j = [p[0] for p in pairs]
    psnr = np.minimum(frame_psnr(frames, episode.rgb[:len(frames)]), PSNR_MAX)
    psnr[:f] = np.nan
    warped, mask = warp_pairs(frames, episode, pairs)
    return {"frame_psnr": psnr, **return_scores(frames[j], episode, pairs),
            "self_consistency_psnr": np.minimum(masked_psnr(warped, frames[j], mask),
                                                PSNR_MAX)}


def return_scores(at_returns: np.ndarray, episode, pairs) -> dict:
    """`return_psnr` (dB, at most PSNR_MAX) and `return_ssim` (n,) of frames (n, h, w, 3)
    shown at the n return frames, against the engine's; `return_index` (n,) their frames."""
    truth = episode.rgb[[p[0] for p in pairs]]
    return {"return_psnr": np.minimum(frame_psnr(at_returns, truth), PSNR_MAX),
            "return_ssim": frame_ssim(at_returns, truth).astype(np.float64),
            "return_index": np.array([p[0] for p in pairs])}


def through_autoencoder(world: World, frames: np.ndarray) -> np.ndarray:
    """uint8 frames (t, h, w, 3) -> world.decode(world.encode(frames)), AE_BATCH at once."""
    return np.concatenate([world.decode(world.encode(frames[s:s + AE_BATCH]))
                           for s in range(0, len(frames), AE_BATCH)])


def oracle_frames(episode, pairs) -> np.ndarray:
    """The engine's frame i* warped into each return pose j with the engine's depth: (n, h,
    w, 3). Pixels frame i* does not cover (nothing hit, outside its view, or occluded)
    keep frame i*'s own pixels there, unwarped."""
    i = [p[1] for p in pairs]
    warped, mask = warp_pairs(episode.rgb, episode, pairs)
    return np.where(mask[..., None], warped, episode.rgb[i])


def reference_scores(world: World, episode, pairs, f: int, T: int) -> dict:
    """The references' scores on one episode's first T frames: {name: scores} with the keys
    of `stream_scores` for the streams (repeat, autoencoder) and of `return_scores` for the
    frames made only at the returns (oracle: `oracle_frames`, copy: frame i*), all through
    the world's autoencoder but repeat."""
    rgb = episode.rgb[:T]
    i = [p[1] for p in pairs]
    oracle = oracle_frames(episode, pairs)  # (n, h, w, 3)
    # the streams start from the engine's first chunk, as a world's open loop does
    repeat = np.concatenate([rgb[:f], repeat_baseline(rgb[f - 1], T - f)])
    autoencoded = np.concatenate([rgb[:f], through_autoencoder(world, rgb[f:])])
    return {"oracle": return_scores(through_autoencoder(world, oracle), episode, pairs),
            "copy": return_scores(through_autoencoder(world, rgb[i]), episode, pairs),
            "repeat": stream_scores(repeat, episode, pairs, f),
            "autoencoder": stream_scores(autoencoded, episode, pairs, f)}


# ----------------------------------------------------------------------------------------
# Pooling over episodes
# ----------------------------------------------------------------------------------------


def pool_variants(variants: dict) -> dict:
    """Variants trained at several seeds ("x", "x_seed1", ...) pooled over seeds
    (`stats.combine_seeds` of SEED_KEYS), each key also over walks (its per-episode
    means)."""
    return combine_seeds(variants, SEED_KEYS,
                         per_walk=lambda r, key: r.get("per_episode", {}).get(key))


def _num(x) -> float | None:
    return None if x is None or np.isnan(x) else float(x)


def summarise(scored: list[dict], seed: int = 0) -> dict:
    """Per-episode scores (`stream_scores` or `return_scores`) of one stream pooled: means
    over all return frames (all generated frames for `all_frames_psnr`), per-episode means,
    bootstrap intervals; None for what the stream does not have."""
    out: dict = {"return_frames": int(sum(len(s["return_psnr"]) for s in scored))}
    per = {"return_frames": [len(s["return_psnr"]) for s in scored]}
    for key in ("return_psnr", "return_ssim", "self_consistency_psnr"):
        have = key in scored[0]
        out[key] = _num(np.concatenate([s[key] for s in scored]).mean()) if have else None
        per[key] = [_num(s[key].mean()) for s in scored] if have else None
    parts = [s["frame_psnr"][np.isfinite(s["frame_psnr"])] for s in scored] \
        if "frame_psnr" in scored[0] else None
    out["all_frames_psnr"] = _num(np.concatenate(parts).mean()) if parts else None
    per["all_frames_psnr"] = [_num(p.mean()) for p in parts] if parts else None
    out["return_psnr_ci"] = bootstrap_interval([s["return_psnr"].sum() for s in scored],
                                               per["return_frames"], RESAMPLES, seed=seed)
    out["all_frames_psnr_ci"] = bootstrap_interval(
        [p.sum() for p in parts], [len(p) for p in parts], RESAMPLES, seed=seed) \
        if parts else None
    return {**out, "per_episode": per}


def _per_frame_mean(rows: list[tuple[np.ndarray, np.ndarray]], T: int) -> np.ndarray:
    """Mean per frame index of values (idx (k,), values (k,)) pairs: (T,), nan where none."""
    total, n = np.zeros(T), np.zeros(T)
    for idx, values in rows:
        np.add.at(total, idx, values)
        np.add.at(n, idx, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / n


def curves(streams: dict[str, list[dict]], T: int) -> dict:
    """For plotting, per frame 1..T: the return PSNR of every stream and the PSNR of every
    stream with all frames, each the mean over the episodes that have one there (None where
    none does), and the number of episodes with a return frame there."""
    out: dict = {"psnr": {}, "return_psnr": {}}
    for name, scored in streams.items():
        out["return_psnr"][name] = _per_frame_mean(
            [(s["return_index"], s["return_psnr"]) for s in scored], T)
        if "frame_psnr" in scored[0]:
            out["psnr"][name] = _per_frame_mean(
                [(np.flatnonzero(np.isfinite(s["frame_psnr"])),
                  s["frame_psnr"][np.isfinite(s["frame_psnr"])]) for s in scored], T)
    first = next(iter(streams.values()))
    count = np.zeros(T, int)
    for s in first:
        count[s["return_index"]] += 1
    clean = lambda v: [None if np.isnan(x) else round(float(x), 3) for x in v]  # noqa: E731
    return {"frame": list(range(1, T + 1)), "return_frames": count.tolist(),
            **{key: {name: clean(v) for name, v in c.items()} for key, c in out.items()}}


# ----------------------------------------------------------------------------------------
# The protocol
# ----------------------------------------------------------------------------------------


def _name(k: int, episode) -> str:
    return (f"episode {k} (seed {episode.meta.get('seed')}, policy "
            f"{episode.meta.get('policy')})")


def check_episodes(episodes, f: int) -> None:
    """Every episode has the engine's depth and at least two chunks of f frames."""
    if not episodes:
        raise ValueError("revisit needs at least one episode, got none")
    for k, ep in enumerate(episodes):
        if ep.depth is None:
            raise ValueError(f"{_name(k, ep)} has no depth: return frames are found from the "
                             f"engine's depth and poses; record it with depth")
        if len(ep) < 2 * f:
            raise ValueError(f"{_name(k, ep)} has {len(ep)} frames, fewer than 2 chunks of "
                             f"{f}: nothing would be generated")


def _same_autoencoder(a: World, b: World) -> bool:
    """Whether two worlds encode and decode with the same weights."""
    def same(x, y):
        sx, sy = x.state_dict(), y.state_dict()
        return sx.keys() == sy.keys() and all(torch.equal(sx[k].cpu(), sy[k].cpu())
                                              for k in sx)
    return a.ae is b.ae or (same(a.ae, b.ae) and same(a.decoder, b.decoder))


def score_world(world: World, episodes, pairs, T: list[int], f: int, seed: int = 0,
                steps: int | None = None, progress=None) -> tuple[list[dict], dict]:
    """Each episode generated open loop (seed + k for episode k) and scored on its first
    T[k] frames: (per-episode `stream_scores`, the median ms of a generated chunk and the
    mean number of memory chunks it read)."""
    scored, ms, reads = [], [], []
    for k, ep in enumerate(episodes):
        out = open_loop(world, ep, seed=seed + k, steps=steps, progress=progress)
        scored.append(stream_scores(out["frames"][:T[k]], ep, pairs[k], f))
        ms += list(out["chunk_ms"])
        reads += [len(m) for m in out["memory_chunks"]]
    return scored, {"open_loop_ms_per_chunk": float(np.median(ms)),
                    "memory_chunks_read": float(np.mean(reads))}


def world_meta(world: World, steps: int | None) -> dict:
    """What a variant is: its checkpoint, sampling steps, memory section and the model's
    memory fields."""
    m = world.config.model
    return {"checkpoint": None if world.path is None else str(world.path),
            "sampling_steps": steps or world.config.sample.steps,
            "memory": dataclasses.asdict(world.config.memory),
            "model_memory": {"memory_tokens": m.memory_tokens,
                             "memory_compress": m.memory_compress,
                             "cache_latent": m.cache_latent}}


def _costs(worlds: dict[str, World], episode, chunks: int, steps: int | None,
           progress=None) -> dict[str, dict]:
    """Each world's streaming cost, measured side by side (`stream_costs`); None when
    `chunks` is 0 (not measured)."""
    if chunks == 0:
        return {name: {"ms_per_chunk": None, "cost_ratio_chunk100_chunk2": None,
                       "ms_vs_first": None, "growth_vs_first": None,
                       "memory_tokens_per_frame": None,
                       "cost_chunks": 0} for name in worlds}
    costs = stream_costs(worlds, episode, chunks=chunks, steps=steps, progress=progress)
    return {name: {k: v for k, v in c.items() if k not in ("chunks", "chunk_ms")}
            | {"cost_chunks": c["chunks"]}
            for name, c in costs.items()}


def scored_episodes(episodes, f: int, T: list[int], min_gap: int, min_overlap: float):
    """The episodes with a return frame (`return_pairs` over frames [f, T[k])): (their
    indices, their pairs); a ValueError when none has one."""
    pairs = [return_pairs(ep, min_gap, min_overlap, start=f, frames=t)
             for ep, t in zip(episodes, T)]
    kept = [k for k, p in enumerate(pairs) if p]
    if not kept:
        raise ValueError(f"none of the {len(episodes)} episodes has a return frame (a view "
                         f"covered by half of one >= {min_gap} frames earlier, at min_overlap "
                         f"{min_overlap}): nothing to score")
    return kept, [pairs[k] for k in kept]


def _episode_record(episodes, kept: list[int], pairs, T: list[int]) -> dict:
    """The `episodes` entry of the result: what was scored and what was left out."""
    out = [k for k in range(len(episodes)) if k not in kept]
    return {"count": len(kept), "seeds": [episodes[k].meta.get("seed") for k in kept],
            "frames": [T[k] for k in kept],
            "policies": [episodes[k].meta.get("policy") for k in kept],
            "return_frames": [len(p) for p in pairs], "excluded": len(out),
            "excluded_seeds": [episodes[k].meta.get("seed") for k in out]}


@torch.no_grad()
def revisit(worlds: dict[str, World], episodes, seed: int = 0, steps: int | None = None,
            cost_chunks: int = 100, progress=None, min_gap: int = MIN_GAP,
            min_overlap: float = MIN_OVERLAP) -> dict:
    """The protocol for each named world on the same episodes (see the module docstring).
    `progress(k)` ticks k generated chunks (the cost's included); `cost_chunks` 0 skips
    the cost (its keys None), else at least 12; `ms_vs_first` is each world's time per
    chunk over the first world's, streamed side by side. The references come
    from the first world's autoencoder; a world with another one carries its own."""
    if not worlds or set(worlds) & set(REFERENCES):
        raise ValueError(f"revisit needs named worlds, none called {REFERENCES}; got "
                         f"{sorted(worlds)}")
    if cost_chunks != 0 and cost_chunks < 12:
        raise ValueError(f"cost_chunks must be 0 (skip) or at least 12, got {cost_chunks}")
    f = max(w.chunk_frames for w in worlds.values())  # frames [0, f) are never scored
    check_episodes(episodes, f)
    T = [min(len(ep) // w.chunk_frames * w.chunk_frames for w in worlds.values())
         for ep in episodes]
    kept, pairs = scored_episodes(episodes, f, T, min_gap, min_overlap)
    result = {"episodes": _episode_record(episodes, kept, pairs, T), "variants": {},
              "references": None}
    eps, T = [episodes[k] for k in kept], [T[k] for k in kept]
    streams, first = {}, None
    costs = _costs(worlds, eps[0], cost_chunks, steps, progress)
    for name, world in worlds.items():
        streams[name], timing = score_world(world, eps, pairs, T, f, seed, steps, progress)
        v = result["variants"][name] = {**summarise(streams[name], seed), **timing,
                                        **costs[name], **world_meta(world, steps)}
        if first is not None and _same_autoencoder(first, world):
            continue
        per = [reference_scores(world, ep, p, f, t) for ep, p, t in zip(eps, pairs, T)]
        refs = {r: summarise([s[r] for s in per], seed) for r in REFERENCES}
        if first is None:
            first, result["references"] = world, refs
            streams.update({r: [s[r] for s in per] for r in REFERENCES})
        else:
            v["references"] = refs  # its own autoencoder: not the first world's
    result.update(curves=curves(streams, max(T)), cost_baseline=next(iter(worlds)),
                  seeds=pool_variants(result["variants"]),
                  return_frames=sum(len(p) for p in pairs), min_gap=min_gap,
                  min_overlap=min_overlap, chunk_frames=f)
    return result
