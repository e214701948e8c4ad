"""The long-horizon protocol (`python -m worldlab eval --suite long`): a minute of open-loop
play against the engine, with references that isolate drift.

Each held-out walk (random starts over the level, the player invulnerable, the engine
replaying the actions) is generated five ways, frame for frame:

    open loop    the first chunk from the engine (or the first `explore` frames: the
                 player has explored the place before the world plays on), every later
                 chunk from the model's own previous chunks: what a player sees
    drift-free   each chunk generated from the engine's own previous chunks (teacher
                 forced all along) with the same noise: the same model without drift, so
                 open loop minus drift-free is the drift alone, not what the world never saw
    autoencoder  the engine's frames through the world's autoencoder: the ceiling
    repeat-last  the context's last frame, forever
    warp-last    the context's last frame warped into each pose with the engine's depth
                 (`baselines.warp_baseline`): what geometry alone gives

The drift-free stream is a next-chunk score (teacher forcing all along), not a ceiling of
open loop; `drift_free=False` leaves it out (a table computes it for its reference only).

Per frame: PSNR and SSIM against the engine, sharpness (variance of the Laplacian of the
grey frame) and motion (mean absolute difference from the previous frame, 0-255). Windows:
frames 33-64 (`early`; later by the frames explored beyond the first chunk) and the last
100 frames (`late`; 901-1,000 of a 1,000-frame walk).
Ratios are of means over the window's frames of all walks; motion catches the freezing
anti-drift training is known to cause, colour distance the palette drift, the realism
distance (`realism.py`, with the walks' engine) the blur PSNR forgives. **Loop closure**:
the late frames whose view a frame more than LOOP_GAP frames earlier covers by at least
LOOP_OVERLAP (the engine's depth and poses, `revisit.covered_frames`), where a world that
kept the place can be scored against a target it has seen (walks of the `loops` player
come back again and again).

Shape legend: T frames of a walk, n chunks, f frames per chunk, h w frame size.
"""

from __future__ import annotations

import numpy as np
import torch

from ..metrics import colour_distance, frame_psnr, frame_ssim, sharpness
from ..model.sampler import chunk_conditions
from ..pretrained import World
from .baselines import warp_baseline
from .generation import episode_conditions
from .memory_rollout import engine_depth, memory_stream
from .realism import engine_features, features_note, frechet_distance
from .revisit import covered_frames
from .stats import combine_seeds

EARLY = (32, 64)  # frames 33-64, 1-based, as the quick suite's horizon ends
LATE_FRAMES = 100  # the last 100 frames of a walk
CURVE_STRIDE = 10  # frames per point of the stored curves
STREAMS = ("open_loop", "drift_free", "autoencoder", "repeat", "warp")
LOOP_GAP = 100  # frames: a loop-closure frame returns to a view seen more than this before
LOOP_OVERLAP = 0.5  # share of its pixels that earlier view covers


@torch.no_grad()
def generate_walk(world: World, episode, seed: int = 0, progress=None,
                  drift_free: bool = True, explore: int = 0) -> dict:
    """The streams of one walk (`STREAMS`; drift-free only if asked), uint8 (T, h, w, 3)
    each, plus the engine's frames.

    The open loop is given the engine's first chunk, or its first `explore` frames (whole
    chunks): its KV window and memory hold them as the drift-free stream's do, and it shows
    them; repeat-last and warp-last start from the last given frame.

    Both model streams stream chunk by chunk with their own KV cache (and, for a world with
    memory, their own memory: the drift-free stream's holds the engine's chunks) and draw
    the same noise per chunk; the world's sampling settings (steps, solver, guidance,
    context noise) apply to both."""
    f, dev = world.chunk_frames, world.device
    T = len(episode) // f * f
    given = given_frames(explore, f, T)
    rgb = episode.rgb[:T]
    truth = world.encode(rgb)  # (1, T, c, h', w')
    actions, c2w, captions = episode_conditions(world, episode, 0, T)
    noise_gen = torch.Generator().manual_seed(seed)
    context_gen = torch.Generator().manual_seed(seed + 1)
    models = ("open_loop", "drift_free") if drift_free else ("open_loop",)
    streams = {name: memory_stream(world, episode) for name in models}
    frames = {**{name: [rgb[:f]] for name in models},
              "autoencoder": [world.decode(truth[:, :f])]}
    for stream in streams.values():
        stream.append_truth(truth[:, :f], chunk_conditions(0, f, actions, c2w, captions),
                            rgb[:f], engine_depth(episode, 0, f))
    for j in range(1, T // f):
        cond = chunk_conditions(j, f, actions, c2w, captions)
        noise = torch.randn((1, f, *truth.shape[2:]), generator=noise_gen).to(dev)
        part = slice(j * f, (j + 1) * f)
        for name, stream in streams.items():
            if name == "open_loop" and j * f < given:  # explored: the engine's chunk
                frames[name].append(rgb[part])
                stream.append_truth(truth[:, part], cond, rgb[part],
                                    engine_depth(episode, j * f, f))
                continue
            x = stream.generate(noise, cond)
            if name == "open_loop":
                stream.append(x, cond, context_gen)
                frames[name].append(stream.show(world.decode(x),
                                                engine_depth(episode, j * f, f)))
            else:
                frames[name].append(world.decode(x))
                stream.append_truth(truth[:, part], cond, rgb[part],
                                    engine_depth(episode, j * f, f))
        frames["autoencoder"].append(world.decode(truth[:, part]))
        if progress is not None:
            progress(1)
    out = {name: np.concatenate(v) for name, v in frames.items()}
    out["repeat"] = np.broadcast_to(rgb[given - 1], rgb.shape)
    out["warp"] = np.concatenate([rgb[:given], warp_baseline(episode, given - 1,
                                                             range(given, T))])
    out["engine"] = rgb
    return out


def given_frames(explore: int, f: int, T: int) -> int:
    """The frames the open loop is given: the first chunk, or `explore` frames (a whole
    number of chunks, fewer than the walk's T)."""
    if isinstance(explore, bool) or not isinstance(explore, int) or explore < 0 \
            or explore % f or explore >= T:
        raise ValueError(f"explore must be a whole number of {f}-frame chunks, >= 0 and "
                         f"fewer than the walk's {T} frames, got {explore!r}")
    return max(explore, f)


def motion(frames: np.ndarray) -> np.ndarray:
    """Mean absolute difference (0-255) of each frame from the previous one: (T,), the
    first frame 0."""
    x = frames.astype(np.float32)
    return np.concatenate([[0.0], np.abs(x[1:] - x[:-1]).mean(axis=(1, 2, 3))])


def walk_scores(walk: dict) -> dict:
    """Per-frame arrays (T,) of one walk: psnr_<stream>, ssim_open_loop, and
    sharpness_<stream or engine> and motion_<stream or engine> of the model streams, the
    autoencoder and the engine (streams the walk has)."""
    streams = [name for name in STREAMS if name in walk]
    out = {f"psnr_{name}": frame_psnr(walk[name], walk["engine"]) for name in streams}
    out["ssim_open_loop"] = frame_ssim(walk["open_loop"], walk["engine"])
    for name in (*(n for n in streams if n not in ("repeat", "warp")), "engine"):
        out[f"sharpness_{name}"] = sharpness(walk[name])
        out[f"motion_{name}"] = motion(walk[name])
    return out


def loop_closure_frames(episode, window: slice, min_gap: int = LOOP_GAP,
                        min_overlap: float = LOOP_OVERLAP) -> np.ndarray:
    """The frames of `window` (indices) whose view a frame more than `min_gap` frames
    earlier covers by at least `min_overlap`, from the engine's depth and poses."""
    frames = range(max(window.start, min_gap + 1), min(window.stop, len(episode)))
    return covered_frames(episode, frames, min_gap + 1, min_overlap)


def loop_closure_scores(scores: list[dict], loops: list[np.ndarray]) -> dict:
    """Per-walk means over each walk's loop-closure frames of the open loop, repeat-last,
    warp-last and the autoencoder (None for a walk without one), and the means over the
    walks that have them."""
    keys = {"open_loop": "loop_closure_psnr", "repeat": "loop_closure_psnr_repeat",
            "warp": "loop_closure_psnr_warp", "autoencoder": "loop_closure_psnr_ae"}
    out = {"loop_closure_frames": int(sum(len(j) for j in loops))}
    for stream, key in keys.items():
        per_walk = [float(s[f"psnr_{stream}"][j].mean()) if len(j) else None
                    for s, j in zip(scores, loops)]
        kept = [v for v in per_walk if v is not None]
        out[f"{key}_late"] = float(np.mean(kept)) if kept else None
        out[f"{key}_late_per_walk"] = per_walk
    return out


def _window(T: int, which: str, explored: int = 0) -> slice:
    """Frames of a window: `early` is EARLY moved on by the `explored` frames given beyond
    the first chunk, `late` the walk's last LATE_FRAMES frames after it."""
    if which == "early":
        return slice(EARLY[0] + explored, EARLY[1] + explored)
    return slice(max(T - LATE_FRAMES, EARLY[1] + explored), T)


def summarise(walks: list[dict], scores: list[dict], context: int, explored: int = 0
              ) -> dict:
    """The window scores (keys like `psnr_late`) and the curves (means over walks, one point
    per CURVE_STRIDE frames from the first generated frame on: the `context` frames are the
    engine's own, `explored` of them beyond the first chunk) of walks of equal length."""
    T = len(walks[0]["engine"])
    mean = {k: np.mean([s[k] for s in scores], axis=0) for k in scores[0]}  # (T,) each
    result = {}
    for which in ("early", "late"):
        w = _window(T, which, explored)
        m = {k: float(v[w].mean()) for k, v in mean.items()}
        pooled = {name: np.concatenate([walk[name][w] for walk in walks])
                  for name in ("open_loop", "drift_free", "engine") if name in walks[0]}
        result.update({
            f"psnr_{which}": m["psnr_open_loop"],
            f"ssim_{which}": m["ssim_open_loop"],
            f"psnr_repeat_{which}": m["psnr_repeat"],
            f"psnr_warp_{which}": m["psnr_warp"],
            f"psnr_ae_{which}": m["psnr_autoencoder"],
            f"sharpness_ratio_vs_engine_{which}":
                m["sharpness_open_loop"] / m["sharpness_engine"],
            f"sharpness_ratio_vs_ae_{which}":
                m["sharpness_open_loop"] / m["sharpness_autoencoder"],
            f"motion_ratio_vs_engine_{which}": m["motion_open_loop"] / m["motion_engine"],
            f"motion_ratio_vs_ae_{which}": m["motion_open_loop"] / m["motion_autoencoder"],
            f"colour_distance_{which}": colour_distance(pooled["open_loop"], pooled["engine"]),
            f"window_{which}": [w.start + 1, w.stop],  # 1-based, inclusive
        })
        if "drift_free" in pooled:  # a next-chunk score: teacher forced all along
            result.update({
                f"psnr_drift_free_{which}": m["psnr_drift_free"],
                f"sharpness_ratio_vs_drift_free_{which}":
                    m["sharpness_open_loop"] / m["sharpness_drift_free"],
                f"colour_distance_drift_free_{which}":
                    colour_distance(pooled["drift_free"], pooled["engine"])})
    n = (T - context) // CURVE_STRIDE * CURVE_STRIDE
    result["curves"] = {
        "frame": list(range(context + CURVE_STRIDE // 2 + 1, context + n + 1, CURVE_STRIDE)),
        **{k: np.round(v[context:context + n].reshape(-1, CURVE_STRIDE).mean(1), 3).tolist()
           for k, v in mean.items()}}
    # the open loop's curve of each walk: intervals over walks (`table loops`)
    result["curves_per_walk"] = {"psnr_open_loop": [
        np.round(s["psnr_open_loop"][context:context + n].reshape(-1, CURVE_STRIDE).mean(1),
                 3).tolist() for s in scores]}
    return result


def realism_late(walks: list[dict], window: slice, engine: str | None, size: int) -> dict:
    """The realism distances (`realism.py`) of the window's frames of every walk pooled:
    open loop, the autoencoder, repeat-last and warp-last, each against the engine's same
    frames; None and why where `engine` has no probe for `size` px frames."""
    features, why = engine_features(engine, size)
    if features is None:
        return {"realism_distance_late": None, "realism_note": why}
    pooled = lambda name: np.concatenate([w[name][window] for w in walks])  # noqa: E731
    engine_feats = features(pooled("engine"))
    rows = {"": "open_loop", "_ae": "autoencoder", "_repeat": "repeat", "_warp": "warp"}
    return {**{f"realism_distance{k}_late": frechet_distance(features(pooled(name)),
                                                              engine_feats)
               for k, name in rows.items()},
            "realism_note": features_note(engine, engine_feats)}


def long_horizon(world: World, episodes, seed: int = 0, progress=None,
                 drift_free: bool = True, engine: str | None = None, explore: int = 0) -> dict:
    """The protocol on held-out walks `episodes` of equal length, the open loop given the
    first chunk or `explore` frames (`generate_walk`): window scores, loop closure and (with
    the walks' `engine`) realism in the late window, curves and per-walk late PSNRs."""
    f = world.chunk_frames
    lengths = {len(ep) // f for ep in episodes}
    if len(lengths) != 1 or min(lengths) * f <= EARLY[1]:
        raise ValueError(f"long_horizon needs walks of one length, longer than {EARLY[1]} "
                         f"frames; got {sorted(len(ep) for ep in episodes)}")
    given = given_frames(explore, f, min(lengths) * f)
    if given - f + EARLY[1] >= min(lengths) * f:
        raise ValueError(f"explore={explore} leaves too short an open loop in a "
                         f"{min(lengths) * f}-frame walk: its early window ends "
                         f"{EARLY[1] - f} frames after the given {given}")
    walks = [generate_walk(world, ep, seed + 2 * k, progress, drift_free, explore)
             for k, ep in enumerate(episodes)]
    scores = [walk_scores(w) for w in walks]
    late = _window(len(walks[0]["engine"]), "late", given - f)
    loops = [loop_closure_frames(ep, late) for ep in episodes]
    realism = realism_late(walks, late, engine, world.size) if engine else {}
    return {**summarise(walks, scores, given, given - f),
            **loop_closure_scores(scores, loops), **realism, "walks": len(walks),
            "frames": len(walks[0]["engine"]), "given_frames": given,
            "psnr_late_per_walk": [float(s["psnr_open_loop"][late].mean()) for s in scores]}


SEED_KEYS = ("psnr_late", "psnr_drift_free_late", "sharpness_ratio_vs_drift_free_late",
             "sharpness_ratio_vs_ae_late", "motion_ratio_vs_ae_late", "psnr_early")


def pool_methods(methods: dict) -> dict:
    """Methods trained at several seeds ("x", "x_seed1", ...) pooled over seeds
    (`stats.combine_seeds` of SEED_KEYS), the late PSNR also over walks."""
    return combine_seeds(methods, SEED_KEYS, per_walk=lambda r, key: r.get(f"{key}_per_walk"))
