"""The camera-following protocol: does the model move the camera as it is told, per control?

The motion probe (`train.probes`, an inverse-dynamics network trained on engine frame pairs
`gap` frames apart with the engine's poses) reads pairs of generated frames from the
open-loop rollouts (`protocols.open_loop`) and says how the camera moved between them:
forward and strafe metres, yaw and pitch degrees. Its answer is compared with the motion the
rollout was commanded (the episode's own poses, or the mirrored ones for the mirrored
rollout):

    error            mean absolute error per control on generated frames
    engine error     the same probe on the engine's frames of the same pairs: the probe's
                     own error, what a perfect world scores
    ratio            error / engine error: 1 follows the controls as well as the engine
                     itself; a model that ignores its controls scores about
                     (mean commanded motion) / engine error

Only pairs of two generated frames count (the context is the engine's), and only those
whose commanded turn is at most `MAX_PAIR_YAW` degrees (views that still overlap: what the
probe was trained on).

Shape legend: t frames, h w height width.
"""

from __future__ import annotations

import numpy as np

from ..model.probes import MOTION_FIELDS
from ..train.probes import MAX_PAIR_YAW, relative_motion
from .stats import bootstrap


def _pairs_error(probe, frames: np.ndarray, c2w: np.ndarray, first: int) -> np.ndarray:
    """(4,) mean absolute error of the probe on pairs (i, i + gap), i >= first, of
    `frames` (t, h, w, 3) against the motion of poses `c2w` (t, 4, 4)."""
    gap = probe.config.gap
    i = np.arange(first, len(frames) - gap)
    if len(i) == 0:
        raise ValueError(f"camera following needs more than {gap} generated frames after "
                         f"frame {first}, got {len(frames)} frames")
    commanded = relative_motion(c2w[i], c2w[i + gap])
    keep = np.abs(commanded[:, 2]) <= MAX_PAIR_YAW
    if not keep.any():
        return np.full(4, np.nan)
    said = probe.predict(frames[i[keep]], frames[i[keep] + gap])
    return np.abs(said - commanded[keep]).mean(0)


def camera_scores(rollouts: dict, episodes, probe) -> dict:
    """Per control: the probe's error on the rollouts' generated frames (true controls,
    and mirrored controls against the mirrored poses), on the engine's frames, their
    ratios, and the commanded motion; intervals over episodes."""
    f = rollouts["context"]
    gen, mir, eng, commanded = [], [], [], []
    for k, ep in enumerate(episodes):
        n = f + len(rollouts["true"][k])
        gen.append(_pairs_error(probe, np.concatenate([ep.rgb[:f], rollouts["true"][k]]),
                                ep.c2w[:n], f))
        eng.append(_pairs_error(probe, ep.rgb[:n], ep.c2w[:n], f))
        gap = probe.config.gap
        m = relative_motion(ep.c2w[f:n - gap], ep.c2w[f + gap:n])
        commanded.append(np.abs(m[np.abs(m[:, 2]) <= MAX_PAIR_YAW]).mean(0))
        if rollouts["mirrored"]:
            mir.append(_pairs_error(probe, np.concatenate([ep.rgb[:f],
                                                           rollouts["mirrored"][k]]),
                                    rollouts["mirrored_c2w"][k], f))
    gen, eng, commanded = np.array(gen), np.array(eng), np.array(commanded)
    out = {}
    for c, name in enumerate(MOTION_FIELDS):
        engine_error = float(np.nanmean(eng[:, c]))
        out[name] = {
            "error": bootstrap(gen[:, c]), "engine_error": bootstrap(eng[:, c]),
            "commanded_motion": float(np.nanmean(commanded[:, c])),
            "ratio": float(np.nanmean(gen[:, c]) / engine_error) if engine_error > 0 else None,
            "mirrored_error": bootstrap(np.array(mir)[:, c]) if mir else None}
    return {"gap": probe.config.gap, "episodes": len(episodes), "controls": out}
