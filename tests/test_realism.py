"""The realism score: golden Fréchet distances between Gaussians whose sample means and
covariances are exact, and the shipped DOOM kinds probe's features on real engine frames,
where a blurred copy or a mean-coloured copy of frames lies further from the engine than
the engine's own frames do."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.ndimage import uniform_filter

import worldlab as wl

from worldlab.evaluate import heldout_episodes
from worldlab.evaluate.realism import (frechet_distance, probe_features, realism_distance,
                                      realism_scores)
from worldlab.metrics import frame_psnr
from worldlab.model.autoencoder import VideoAutoencoder
from worldlab.model.dit import WorldModel
from worldlab.pretrained import World


def exact_gaussian(mean: np.ndarray, cov: np.ndarray, n: int = 64, seed: int = 0):
    """n samples (n, d) whose sample mean and covariance (ddof 1) are exactly `mean`, `cov`:
    whitened noise, coloured by the Cholesky factor."""
    z = np.random.default_rng(seed).standard_normal((n, len(mean)))
    z -= z.mean(0)
    z = z @ np.linalg.inv(np.linalg.cholesky(np.cov(z, rowvar=False))).T  # cov exactly I
    return mean + z @ np.linalg.cholesky(cov).T


def test_identical_sets_are_zero_apart():
    a = np.random.default_rng(1).standard_normal((50, 6))
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-6)


def test_two_gaussians_score_the_closed_form():
    # |mu_a - mu_b|^2 = 1 + 4 = 5; S_a = [[2, 1], [1, 2]] (eigenvalues 3, 1), S_b = I:
    # tr(S_a + S_b - 2 S_a^(1/2)) = 4 + 2 - 2 (sqrt 3 + 1) = 4 - 2 sqrt 3
    a = exact_gaussian(np.array([1.0, 2.0]), np.array([[2.0, 1.0], [1.0, 2.0]]), seed=2)
    b = exact_gaussian(np.zeros(2), np.eye(2), seed=3)
    assert frechet_distance(a, b) == pytest.approx(5 + 4 - 2 * math.sqrt(3), rel=1e-9)
    # diagonal covariances: sum of (sigma_a - sigma_b)^2 per axis, one dimension too
    c = exact_gaussian(np.zeros(3), np.diag([4.0, 9.0, 1.0]), seed=4)
    d = exact_gaussian(np.ones(3), np.diag([1.0, 1.0, 1.0]), seed=5)
    assert frechet_distance(c, d) == pytest.approx(3 + 1 + 4 + 0, rel=1e-9)
    assert frechet_distance(c[:, :1], d[:, :1]) == pytest.approx(1 + 1, rel=1e-9)


def test_bad_features_and_frames_are_named():
    a = np.zeros((5, 4))
    with pytest.raises(ValueError, match="same width d, got 4 and 3"):
        frechet_distance(a, np.zeros((5, 3)))
    with pytest.raises(ValueError, match="at least 2 samples per set, got 5 and 1"):
        frechet_distance(a, np.zeros((1, 4)))
    with pytest.raises(ValueError, match=r"2-D \(n, d\), got shapes \(5, 4\) and \(4,\)"):
        frechet_distance(a, np.zeros(4))
    with pytest.raises(ValueError, match="frames_b must be uint8 frames.*float64"):
        realism_distance(np.zeros((2, 8, 8, 3), np.uint8), np.zeros((2, 8, 8, 3)), np.ones)
    with pytest.raises(ValueError, match=r"\(n, 64, 64, 3\), got frames of shape"):
        probe_features("doom")(np.zeros((2, 32, 32, 3), np.uint8))
    with pytest.raises(ValueError, match="no probes at .*nowhere"):
        probe_features("doom", "/nowhere")


@pytest.fixture(scope="module")
def doom_episodes():
    """4 held-out DOOM walks of 64 frames at the probes' 64 px (a few seconds)."""
    return heldout_episodes("doom", 4, 64, 64)


@pytest.fixture(scope="module")
def doom_frames(doom_episodes):
    return np.concatenate([ep.rgb for ep in doom_episodes])  # (256, 64, 64, 3)


def test_blur_and_the_mean_frame_score_further_than_the_engine(doom_frames, one_thread):
    """Even frames against odd frames of the same walks: the engine against itself. The
    even frames blurred (5 x 5 box), or replaced by their mean colour, must lie further
    from the odd frames, though the blur wins PSNR against them (measured 24.6 dB against
    the sharp frames' 23.2)."""
    features = probe_features("doom")
    even, odd = doom_frames[0::2], doom_frames[1::2]
    blurred = uniform_filter(even.astype(np.float64), (1, 5, 5, 1)).round().astype(np.uint8)
    mean = np.broadcast_to(even.mean((0, 1, 2)).round().astype(np.uint8), even.shape)
    itself = realism_distance(even, odd, features)
    blur = realism_distance(blurred, odd, features)
    brown = realism_distance(np.ascontiguousarray(mean), odd, features)
    assert 0 < itself < blur < brown
    assert blur > 1.5 * itself  # measured: ~2x (14 against 29)
    assert features(even).shape == (len(even), 256)
    assert frame_psnr(blurred, odd).mean() > frame_psnr(even, odd).mean()


def test_the_quick_suite_rows_put_a_perfect_rollout_at_zero(doom_episodes, one_thread):
    """A rollout that is the engine's own frames scores 0; the tiny preset's untrained
    autoencoder and repeat-last lie further away; without probes the rows are None and
    the note says why."""
    torch.manual_seed(0)
    cfg = wl.make_config("tiny", data__engine="doom", data__size=64)
    ae = VideoAutoencoder.from_config_dataclass(cfg.autoencoder).eval()
    model = WorldModel.from_config_dataclass(cfg.model, ae.config.latent_channels,
                                             64 // ae.downsample).eval()
    world = World(ae, model, cfg, torch.device("cpu"))
    f, horizon = world.chunk_frames, 16
    rollouts = {"context": f, "true": [ep.rgb[f:f + horizon] for ep in doom_episodes]}
    r = realism_scores(world, rollouts, doom_episodes, "doom")
    assert r["realism_distance"] == pytest.approx(0.0, abs=1e-6)
    assert r["realism_distance_ae"] > 0 and r["realism_distance_repeat"] > 0
    assert f"{len(doom_episodes) * horizon} frames per set" in r["realism_note"]
    none = realism_scores(world, rollouts, doom_episodes, "atari")
    assert none["realism_distance_repeat"] is None and "no probes at" in none["realism_note"]
