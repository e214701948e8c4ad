"""Realism: how far generated frames are from the engine's, as a Fréchet distance between the
two sets of frames in the feature space of a network trained here on engine frames.

PSNR rewards the mean: a blurred or mean-coloured frame sits close to every frame it might
have been, so a model unsure of the future scores well by predicting mush. A Fréchet
distance compares the distribution of features (their means and covariances) instead: a
set of blurred frames has the wrong edges and textures, and the wrong spread of them, so
it sits far from the engine's set however close each frame is in pixels (Heusel et al.
2017, FID). Nothing is downloaded: the features are the penultimate layer of the world's
engine's shipped kinds probe (`data/checkpoints/probes/<engine>/kinds`, trained on engine
frames with the engine's labels, `train/probes.py`): the trunk's last map pooled by its
mean and its max (256 numbers at the default channels). The motion probe is not used: it
reads two frames stacked, so its features mix a pair and say how the camera moved, not how
a frame looks.

The distance is biased upward by the sampling noise of the covariances, the more so with
fewer frames than features (the quick suite has ~128-256 frames for 256 features), so it is
comparable only between sets of the same size: the quick suite scores the model, the
autoencoder's reconstructions and repeat-last on the same frames of the same walks.

Shape legend: n frames, d features, h w height/width.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.linalg

from ..paths import ROOT
from .baselines import repeat_baseline
from .shipped import load_shipped_probes, probes_dir

KEYS = ("realism_distance", "realism_distance_ae", "realism_distance_repeat")
SQRTM_OFFSET = 1e-6  # added to both covariances' diagonals when sqrtm of their product fails


def frechet_distance(feats_a: np.ndarray, feats_b: np.ndarray) -> float:
    """The Fréchet distance between Gaussians fitted to two feature sets (n_a, d), (n_b, d):
    |mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a S_b)^(1/2)), with sample covariances."""
    a, b = np.asarray(feats_a, np.float64), np.asarray(feats_b, np.float64)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"features must be 2-D (n, d), got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"the two feature sets must have the same width d, got "
                         f"{a.shape[1]} and {b.shape[1]}")
    if min(len(a), len(b)) < 2:
        raise ValueError(f"a covariance needs at least 2 samples per set, got {len(a)} and "
                         f"{len(b)}")
    mu = a.mean(0) - b.mean(0)  # (d,)
    s_a, s_b = np.cov(a, rowvar=False, ddof=1).reshape(a.shape[1], -1), \
        np.cov(b, rowvar=False, ddof=1).reshape(b.shape[1], -1)  # (d, d); d = 1 stays 2-D
    root = _sqrtm_product(s_a, s_b)
    return float(max(mu @ mu + np.trace(s_a) + np.trace(s_b) - 2 * np.trace(root), 0.0))


def _sqrtm_product(s_a: np.ndarray, s_b: np.ndarray) -> np.ndarray:
    """The real part of (s_a s_b)^(1/2). With fewer samples than features both covariances
    are singular and scipy warns, yet the square root (and its trace) is still defined; only
    a non-finite result retries with a small offset on the diagonals, as pytorch-fid does."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        root = scipy.linalg.sqrtm(s_a @ s_b)
        if not np.isfinite(root).all():
            eye = SQRTM_OFFSET * np.eye(len(s_a))
            root = scipy.linalg.sqrtm((s_a + eye) @ (s_b + eye))
    return np.real(root)


def realism_distance(frames_a: np.ndarray, frames_b: np.ndarray,
                     features: Callable[[np.ndarray], np.ndarray]) -> float:
    """The Fréchet distance between two sets of uint8 frames (n, h, w, 3) in the space of
    `features` (uint8 frames (n, h, w, 3) -> (n, d)), e.g. `probe_features(engine)`."""
    for name, f in (("frames_a", frames_a), ("frames_b", frames_b)):
        if f.dtype != np.uint8 or f.ndim != 4 or f.shape[-1] != 3:
            raise ValueError(f"{name} must be uint8 frames (n, h, w, 3), got {f.dtype} "
                             f"{f.shape}")
    return frechet_distance(features(frames_a), features(frames_b))


def probe_features(engine: str, path=None) -> Callable[[np.ndarray], np.ndarray]:
    """The penultimate features of `engine`'s shipped kinds probe (or the probes at `path`):
    uint8 frames (n, size, size, 3) -> (n, 2c); ValueError when there are none."""
    return load_shipped_probes(engine, path).kinds.features


def realism_scores(world, rollouts: dict, episodes, engine: str | None) -> dict:
    """The quick suite's realism rows on the open-loop rollouts (`protocols.open_loop`):
    the model's frames, the autoencoder's reconstructions of the engine's frames and
    repeat-last, each against the engine's frames at the same steps (`KEYS`), and
    `realism_note`: the features used, or why the keys are None."""
    features, why = engine_features(engine, world.size)
    if features is None:
        return {**dict.fromkeys(KEYS), "realism_note": why}
    f = rollouts["context"]
    gen = rollouts["true"]  # [(horizon, h, w, 3)] per episode
    true = [ep.rgb[f:f + len(g)] for ep, g in zip(episodes, gen)]
    ae = [world.decode(world.encode(t)) for t in true]
    repeat = [repeat_baseline(ep.rgb[f - 1], len(g)) for ep, g in zip(episodes, gen)]
    engine_feats = features(np.concatenate(true))  # (n, d), shared by the three rows
    score = lambda frames: frechet_distance(features(np.concatenate(frames)),  # noqa: E731
                                            engine_feats)
    return {"realism_distance": score(gen), "realism_distance_ae": score(ae),
            "realism_distance_repeat": score(repeat),
            "realism_note": features_note(engine, engine_feats)}


def features_note(engine: str, engine_feats: np.ndarray) -> str:
    """What a realism score was measured with: the probe, its width, the frames per set."""
    return (f"Fréchet distance in the features of {_shown(probes_dir(engine))}/kinds "
            f"({engine_feats.shape[1]} per frame), {len(engine_feats)} frames per set")


def _shown(path: Path) -> str:
    """`path` relative to the repository when it is inside it (a note reads the same on
    every machine)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def engine_features(engine: str | None, size: int) -> tuple[Callable | None, str]:
    """The kinds probe's features for `engine` at `size` px, or None and why not."""
    if engine is None:
        return None, "the world names no engine, so there are no probes to read its frames"
    try:
        probe = load_shipped_probes(engine).kinds
    except ValueError as e:
        return None, f"no realism score: {e}"
    if probe.config.size != size:
        return None, (f"no realism score: the {engine} probes read {probe.config.size} px "
                      f"frames, the world makes {size} px frames")
    return probe.features, ""
