"""Protocols that score a world against the engine's ground truth (the `eval` command is
in `evaluate.cli`).

Every score replays the same actions in the engine and compares what the model generated
with the engine's own frames (PSNR and SSIM on 0-255 frames). Protocols of the quick suite:

1. next chunk (teacher forced): the model sees the true previous chunk(s) and generates the
   next one; the same chunk is scored for the trivial baselines "repeat the last frame" and
   "warp the last frame with the known camera motion and its depth" (holes keep the last
   frame's colour), and for the autoencoder's own reconstruction (the ceiling);
2. drift: an open-loop rollout of `horizon` frames from one context chunk, PSNR per step,
   against "repeat the last frame" per step;
3. controls: the same rollout with mirrored controls (turn left instead of right, strafe
   the other way; poses mirrored about the first camera's vertical plane) - a model that
   uses its controls loses PSNR against the ground truth;
4. realism: a Fréchet distance between the drift rollouts' frames and the engine's in the
   features of the engine's kinds probe (`realism`), beside the autoencoder's
   reconstructions and repeat-last: a blurred or mean frame cannot win it as it wins PSNR;
5. runtime: streaming frames/s, per-chunk latency, and the cost of chunk 50 over chunk 2.

Held-out episodes are recorded fresh from seeds the training data never used
(`HELDOUT_SEED`), so start points and seeds are unseen.

Shape legend: t frames, n chunks, h w height/width, c channels.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..camera import ACTION_FIELDS, invert_pose
from ..episodes import CHARACTER, SCENES, record_episode
from ..metrics import frame_psnr, frame_ssim
from ..model.autoencoder import evaluate_autoencoder, frames_to_tensor
from ..memory.stream import NO_MEMORY, Stream, world_stream
from ..pretrained import World
from .baselines import repeat_baseline, view_warp_baseline, warp_baseline
from .predictors import as_predictor
from .realism import realism_scores

HELDOUT_SEED = 1_000_000  # training recordings use seeds below this
_YAW, _RIGHT = ACTION_FIELDS.index("yaw"), ACTION_FIELDS.index("right")


# ----------------------------------------------------------------------------------------
# Mirrored controls (generating from an episode: `generation`)
# ----------------------------------------------------------------------------------------


def mirror_controls(actions: np.ndarray, c2w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mirror left/right: negate yaw and strafe, reflect poses about the first camera's
    vertical plane (x -> -x in its OpenCV frame), so the mirrored path is a valid path."""
    a = actions.copy()
    a[:, _YAW] *= -1
    a[:, _RIGHT] *= -1
    S = np.diag([-1.0, 1.0, 1.0, 1.0])
    rel = invert_pose(c2w[0]) @ c2w  # (t, 4, 4) in the first camera's frame
    return a, c2w[0] @ (S @ rel @ S)


# ----------------------------------------------------------------------------------------
# Protocols
# ----------------------------------------------------------------------------------------


def next_chunk(world, episodes, starts_per_episode: int = 4, seed: int = 0,
               steps: int | None = None, context_chunks: int | None = None) -> dict:
    """Teacher-forced next chunk after `context_chunks` true chunks (default the context the
    predictor was trained with, its `context_chunks`: a world's KV window), at several start
    points per episode (`world`: a World, sampled with `steps` (default its own), or any
    predictor), beside repeat-last, warp-last and the gap-free view warp (with the engine's
    depth: what geometry alone gives) from the last true frame; the autoencoder's
    reconstruction (the ceiling) only for a world. An episode too short for that context and
    a chunk gets the context it has room for (counted in `next_chunk_context_capped`); one
    without room for one chunk of context is left out (`next_chunk_short_episodes`).
    `*_per_episode`: the episode means the suite's intervals and the paired differences are
    drawn from."""
    pred = as_predictor(world, steps)
    ae_world = getattr(pred, "world", None)  # a World (or a WorldPredictor's) has a ceiling
    f = pred.chunk_frames
    k = context_chunks if context_chunks is not None else getattr(pred, "context_chunks", 1)
    if not (isinstance(k, (int, np.integer)) and k >= 1):
        raise ValueError(f"context_chunks must be a positive number of chunks, got {k!r}")
    rows, capped = [], 0  # per start: episode, model psnr, ssim, repeat, warp, recon, view
    rng = np.random.default_rng(seed)
    for e, ep in enumerate(episodes):
        ctx = min(int(k), len(ep) // f - 1) * f
        if ctx < f:
            continue
        capped += ctx < k * f
        last_start = (len(ep) - ctx - f) // f
        for start in sorted(rng.choice(last_start + 1, min(starts_per_episode, last_start + 1),
                                       replace=False) * f):
            at = start + ctx  # the scored chunk's first frame
            true = ep.rgb[at:at + f]
            gen = pred.predict(ep, start, ctx, ctx + f, seed=seed)
            warp, view = (frame_psnr(baseline(ep, at - 1, range(at, at + f)), true).mean()
                          if ep.depth is not None else np.nan
                          for baseline in (warp_baseline, view_warp_baseline))
            recon = frame_psnr(ae_world.decode(ae_world.encode(true)), true).mean() \
                if ae_world is not None else np.nan
            rows.append((e, frame_psnr(gen, true).mean(), frame_ssim(gen, true).mean(),
                         frame_psnr(repeat_baseline(ep.rgb[at - 1], f), true).mean(),
                         warp, recon, view))
    if not rows:
        raise ValueError(f"no episode has room for a chunk of context and a {f}-frame chunk "
                         f"(longest: {max(map(len, episodes), default=0)} frames)")
    r = np.array(rows, dtype=np.float64)
    mean = lambda k: None if np.isnan(r[:, k]).all() else float(np.nanmean(r[:, k]))  # noqa: E731
    per_episode = lambda k: [float(r[r[:, 0] == e, k].mean())  # noqa: E731
                             for e in range(len(episodes)) if (r[:, 0] == e).any()]
    return {"next_chunk_psnr": mean(1), "next_chunk_ssim": mean(2),
            "baseline_repeat_psnr": mean(3), "baseline_warp_psnr": mean(4),
            "baseline_view_warp_psnr": mean(6), "autoencoder_psnr": mean(5),
            "next_chunk_samples": len(r),
            "next_chunk_context_frames": int(k) * f, "next_chunk_context_capped": capped,
            "next_chunk_short_episodes": len(episodes) - len(set(r[:, 0].astype(int))),
            "next_chunk_psnr_per_episode": per_episode(1),
            "baseline_repeat_psnr_per_episode": per_episode(3),
            "baseline_warp_psnr_per_episode": per_episode(4),
            "autoencoder_psnr_per_episode": per_episode(5)}


def open_loop(world, episodes, horizon: int = 32, seed: int = 0, steps: int | None = None,
              mirrored: bool = True) -> dict:
    """Open-loop rollouts of `horizon` frames from each episode's first true chunk, with the
    true controls and (`mirrored`) with mirrored ones: {"context", "true": [(horizon, h, w,
    3)], "mirrored": [...], "mirrored_c2w": [(context + horizon, 4, 4)], "seconds"}; the
    drift and camera-following protocols read them."""
    pred = as_predictor(world, steps)
    f = pred.chunk_frames
    out = {"context": f, "true": [], "mirrored": [], "mirrored_c2w": [], "seconds": 0.0}
    t0 = time.perf_counter()
    for ep in episodes:
        out["true"].append(pred.predict(ep, 0, f, f + horizon, seed=seed))
        if mirrored:
            a, c = mirror_controls(ep.actions[:f + horizon], ep.c2w[:f + horizon])
            out["mirrored"].append(pred.predict(ep, 0, f, f + horizon, a, c, seed=seed))
            out["mirrored_c2w"].append(c)
    out["seconds"] = time.perf_counter() - t0
    out["frames"] = sum(len(g) for g in out["true"] + out["mirrored"])
    return out


def drift_scores(rollouts: dict, episodes) -> dict:
    """PSNR per step of open-loop rollouts (`open_loop`) with true and mirrored controls,
    against repeat-last; per-episode means for the intervals."""
    f = rollouts["context"]
    curve, mirrored, repeat = [], [], []
    for k, ep in enumerate(episodes):
        gen = rollouts["true"][k]
        true = ep.rgb[f:f + len(gen)]
        curve.append(frame_psnr(gen, true))
        if rollouts["mirrored"]:
            mirrored.append(frame_psnr(rollouts["mirrored"][k], true))
        repeat.append(frame_psnr(repeat_baseline(ep.rgb[f - 1], len(gen)), true))
    return {"rollout_psnr": np.mean(curve, 0).round(3).tolist(),
            "baseline_repeat_rollout_psnr": np.mean(repeat, 0).round(3).tolist(),
            "mirrored_actions_rollout_psnr": float(np.mean(mirrored)) if mirrored else None,
            "rollout_psnr_mean": float(np.mean(curve)), "rollout_episodes": len(curve),
            "rollout_psnr_per_episode": np.mean(curve, 1).round(3).tolist(),
            "mirrored_drop_per_episode": (np.mean(curve, 1) - np.mean(mirrored, 1)).round(3)
            .tolist() if mirrored else []}


def drift(world, episodes, horizon: int = 32, seed: int = 0,
          steps: int | None = None) -> dict:
    """Open-loop rollout PSNR per step (true and mirrored controls) vs repeat-last."""
    return drift_scores(open_loop(world, episodes, horizon, seed, steps), episodes)


def sync(device: torch.device) -> None:
    """Wait for the device, so wall time measures the work (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def still_conditions(world: World) -> dict:
    """Conditioning of a chunk seen by a still camera: zero actions (1, f, a), identity
    poses (1, f, 4, 4), the world's scene caption (1, k, e). Speed does not depend on it."""
    f, dev, engine = world.chunk_frames, world.device, world.config.data.engine
    return {"actions": torch.zeros(1, f, world.model.config.action_width, device=dev),
            "c2w": torch.eye(4, device=dev).expand(1, f, 4, 4).contiguous(),
            "text": world.embed([(SCENES.get(engine, engine), CHARACTER, "")])[:, 0]}


def chunk_noise(world: World, generator: torch.Generator) -> torch.Tensor:
    """Seeded noise (1, f, c, h, w) for one chunk of `world`."""
    m = world.model.config
    return torch.randn((1, world.chunk_frames, m.latent_channels, m.latent_size,
                        m.latent_size), generator=generator).to(world.device)


def speed_stream(world: World) -> Stream:
    """The stream the speed protocols time: the plain KV stream (no memory: a still camera
    at identity poses has nothing to retrieve; `memory_rollout.stream_costs` times memory)."""
    return world_stream(world, memory=NO_MEMORY)


@torch.no_grad()
def make_chunk(world: World, stream: Stream, noise: torch.Tensor, cond: dict,
               steps: int | None = None):
    """Make one chunk on `stream` from `noise` (1, f, c, h, w) with `steps` (default the
    world's) and append it (deferred: its K/V ride the next chunk's first pass), then decode
    it. Returns the latents and the seconds spent in the transformer and in the decode."""
    t0 = time.perf_counter()
    x = stream.step(noise, cond, steps)
    sync(world.device)
    t1 = time.perf_counter()
    world.decode(x)
    sync(world.device)
    return x, t1 - t0, time.perf_counter() - t1


def runtime(world: World, chunks: int = 50, steps: int | None = None) -> dict:
    """Streaming speed with the KV cache: per-chunk latency (sample + append + decode), and
    its transformer (sample + append) and decode parts, medians after 2 warm-up chunks."""
    f, stream, cond = world.chunk_frames, speed_stream(world), still_conditions(world)
    g = torch.Generator().manual_seed(0)
    timed = [make_chunk(world, stream, chunk_noise(world, g), cond, steps)[1:]
             for _ in range(chunks)]
    transformer_ms, decode_ms = 1e3 * np.array(timed).T  # (chunks,) each
    lat_ms = transformer_ms + decode_ms
    steady = float(np.median(lat_ms[2:]))
    return {"chunk_latency_ms": steady, "fps": 1000 * f / steady,
            "transformer_ms": float(np.median(transformer_ms[2:])),
            "decode_ms": float(np.median(decode_ms[2:])),
            "time_to_first_chunk_ms": float(lat_ms[0]),
            # medians over 5 chunks on either side damp the noise of a shared machine
            "cost_ratio_chunk50_chunk2": float(np.median(lat_ms[-5:]) / np.median(lat_ms[1:6])),
            "latency_ms_per_chunk": np.round(lat_ms, 2).tolist()}


# ----------------------------------------------------------------------------------------
# The quick suite
# ----------------------------------------------------------------------------------------


def heldout_episodes(engine: str, n: int, frames: int, size: int,
                     policy: str | tuple[str, ...] = "mix", seed: int = HELDOUT_SEED,
                     start: str = "player", maps: tuple[str, ...] | None = None,
                     **engine_opts) -> list:
    """Fresh episodes from seeds the training recordings never use; `start="random"` draws
    each start over the whole reachable level, episode k plays maps[k % len(maps)] and,
    for a sequence of policies, policy[k % len(policy)]."""
    policies = (policy,) if isinstance(policy, str) else tuple(policy)
    return [record_episode(engine, seed + k, frames, size, policies[k % len(policies)],
                           start=start, map=None if not maps else maps[k % len(maps)],
                           **engine_opts)
            for k in range(n)]


def whole_walks(engine: str, n: int, frames: int, size: int, seed: int,
                policy: str | tuple[str, ...] = "mix", **opts) -> tuple[list, dict]:
    """`n` held-out walks (`heldout_episodes` from `seed` on, with `policy` and `opts`) that
    last `frames` frames: a walk that ends early (the player died or left the map) is left
    out and counted, and the next seed tried; and {"seeds_tried", "ended_early": seeds}."""
    walks, tried, short = [], 0, []
    while len(walks) < n:
        batch = heldout_episodes(engine, n - len(walks), frames, size, policy,
                                 seed=seed + tried, **opts)
        short += [seed + tried + k for k, ep in enumerate(batch) if len(ep) < frames]
        walks += [ep for ep in batch if len(ep) >= frames]
        tried += len(batch)
        if len(walks) < n and tried >= 4 * n:
            raise RuntimeError(f"only {len(walks)} of {tried} {engine} walks lasted {frames} "
                               f"frames (seeds from {seed}; ended early: {short}); expected "
                               f"{n}")
    return walks, {"seeds_tried": tried, "ended_early": short}


@torch.no_grad()
def autoencoder_scores(ae, episodes, max_frames: int = 1024) -> dict:
    """An autoencoder (a world's `.ae`) on the episodes' frames (the first `max_frames`): psnr,
    ssim, sharpness_ratio and colour_distance against the engine (`evaluate_autoencoder`)."""
    rgb = np.concatenate([ep.rgb for ep in episodes])[:max_frames]  # (n, h, w, 3)
    return {**evaluate_autoencoder(ae, frames_to_tensor(rgb)), "frames": len(rgb)}


QUICK_STEPS = ("next_chunk", "drift", "realism", "runtime")  # what `progress` is told


def quick_suite(world: World, episodes, horizon: int = 32, starts_per_episode: int = 4,
                runtime_chunks: int = 50, progress=None, steps: int | None = None,
                engine: str | None = None) -> dict:
    """All quick protocols on `episodes` (each at least one chunk + `horizon` frames), with
    `steps` sampling steps (default: the world's); realism reads the drift rollouts with
    the probes of `engine` (default: the one the world was trained on)."""
    if engine is None and world.config is not None:
        engine = world.config.data.engine
    result, rolls = {}, {}  # rolls: drift's open-loop rollouts, which realism reads too

    def drift_step() -> dict:
        rolls.update(open_loop(world, episodes, horizon, steps=steps))
        return drift_scores(rolls, episodes)

    for name, fn in (("next_chunk",
                      lambda: next_chunk(world, episodes, starts_per_episode, steps=steps)),
                     ("drift", drift_step),
                     ("realism", lambda: realism_scores(world, rolls, episodes, engine)),
                     ("runtime", lambda: runtime(world, runtime_chunks, steps))):
        result.update(fn())
        if progress is not None:
            progress(name)
    result["bars"] = {
        "next_chunk_minus_repeat_db": result["next_chunk_psnr"] - result["baseline_repeat_psnr"],
        "rollout_beats_repeat_every_step": bool(np.all(
            np.array(result["rollout_psnr"]) > np.array(result["baseline_repeat_rollout_psnr"]))),
        "mirrored_drop_db": result["rollout_psnr_mean"] - result["mirrored_actions_rollout_psnr"],
    }
    return result
