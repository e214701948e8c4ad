"""The video autoencoder and the image metrics: tiny, seeded, numeric."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from worldlab.config import make_config
from worldlab.episodes import LatentCache
from worldlab.metrics import frame_psnr, gaussian_window, psnr, ssim, uint8_psnr_ceiling
from worldlab.model import autoencoder as A
from worldlab.train import FrameDataset, autoencoder_loss, autoencoder_train_config, fit

from synthetic_episodes import synthetic_rgb, synthetic_store

TINY = make_config("tiny").autoencoder


def tiny_ae(seed: int = 0, **kw) -> A.VideoAutoencoder:
    torch.manual_seed(seed)
    cfg = make_config("tiny", autoencoder=kw).autoencoder
    return A.VideoAutoencoder.from_config_dataclass(cfg).eval()


# ----------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------


def test_psnr_golden_and_identical():
    x = torch.zeros(2, 3, 16, 16)
    y = x + 0.1  # MSE 0.01 over a range of 2: 10 log10(4 / 0.01)
    assert psnr(x, y) == pytest.approx(torch.full((2,), 10 * math.log10(400.0)), abs=1e-4)
    assert psnr(x, y, data_range=1.0)[0] == pytest.approx(20.0, abs=1e-4)
    assert torch.isinf(psnr(x, x)).all()


def test_frame_psnr_of_identical_frames_is_the_uint8_ceiling():
    a = np.random.default_rng(0).integers(0, 255, (3, 64, 64, 3), dtype=np.uint8)
    b = a.copy()
    b[1, 0, 0, 0] += 1  # the smallest error uint8 frames can have
    b[2] = 255 - a[2]
    p = frame_psnr(b, a)
    assert p[0] == p[1] == pytest.approx(10 * math.log10(255 ** 2 * 64 * 64 * 3), abs=1e-3)
    assert uint8_psnr_ceiling((64, 64, 3)) == pytest.approx(89.0, abs=0.05)
    assert 0 < p[2] < 10 and np.isfinite(p).all()


def test_ssim_identical_is_one_and_constant_images_analytic():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 24, 24, generator=g) * 2 - 1
    assert ssim(x, x) == pytest.approx(torch.ones(2), abs=1e-6)
    # constant images: no variance, so SSIM is the luminance term (2ab + C1) / (a^2 + b^2 + C1)
    a, b, c1 = 0.2, -0.3, (0.01 * 2.0) ** 2
    expect = (2 * a * b + c1) / (a * a + b * b + c1)
    got = ssim(torch.full((1, 3, 16, 16), a), torch.full((1, 3, 16, 16), b))
    assert got.item() == pytest.approx(expect, rel=1e-6)


def test_ssim_single_window_matches_numpy_reference():
    # an 11x11 image has exactly one window: SSIM from Gaussian-weighted moments by hand
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, (11, 11))
    y = np.clip(x + rng.normal(0, 0.1, (11, 11)), 0, 1)
    r = np.arange(11) - 5.0
    g = np.exp(-r ** 2 / (2 * 1.5 ** 2))
    w = np.outer(g, g) / g.sum() ** 2
    mx, my = (w * x).sum(), (w * y).sum()
    vx, vy = (w * x * x).sum() - mx ** 2, (w * y * y).sum() - my ** 2
    cxy = (w * x * y).sum() - mx * my
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    ref = (2 * mx * my + c1) * (2 * cxy + c2) / ((mx ** 2 + my ** 2 + c1) * (vx + vy + c2))
    got = ssim(torch.tensor(x)[None, None], torch.tensor(y)[None, None], data_range=1.0)
    assert got.item() == pytest.approx(ref, rel=1e-5)
    assert float(gaussian_window().sum()) == pytest.approx(1.0)


def test_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        psnr(torch.zeros(1, 3, 8, 8), torch.zeros(1, 3, 8, 9))
    with pytest.raises(ValueError, match="smaller than the 11x11"):
        ssim(torch.zeros(1, 3, 8, 8), torch.zeros(1, 3, 8, 8))
    with pytest.raises(ValueError, match="odd"):
        gaussian_window(4)


# ----------------------------------------------------------------------------------------
# Frames <-> tensors
# ----------------------------------------------------------------------------------------


def test_frames_round_trip_exact():
    rgb = np.random.default_rng(0).integers(0, 256, (2, 5, 8, 8, 3), dtype=np.uint8)
    x = A.frames_to_tensor(rgb)
    assert x.shape == (2, 5, 3, 8, 8) and x.min() >= -1 and x.max() <= 1
    np.testing.assert_array_equal(A.tensor_to_frames(x), rgb)
    with pytest.raises(ValueError, match="uint8"):
        A.frames_to_tensor(rgb.astype(np.float32))


def test_depth_channel_round_trip_with_inf():
    depth = np.array([[0.5, 1.0], [4.0, np.inf]], np.float32)
    ch = A.depth_to_channel(depth)
    assert ch.shape == (1, 2, 2) and ch[0, 1, 1] == -1.0
    back = A.channel_to_depth(ch)
    assert torch.isinf(back[1, 1])
    np.testing.assert_allclose(back.numpy()[np.isfinite(depth)], depth[np.isfinite(depth)],
                               rtol=1e-6)
    with pytest.raises(ValueError, match="positive"):
        A.depth_to_channel(np.zeros((2, 2), np.float32))


# ----------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------


def test_shapes_params_and_determinism():
    ae = tiny_ae()
    assert sum(p.numel() for p in ae.parameters()) == 81_215  # golden: tiny preset
    assert ae.downsample == 8
    x = A.frames_to_tensor(synthetic_rgb(3, 32, seed=0))[None]  # (1, 3, 3, 32, 32)
    z = ae.encode(x)
    assert z.shape == (1, 3, TINY.latent_channels, 4, 4)
    assert torch.equal(z, ae.encode(x))  # posterior mode: caching is deterministic
    y = ae.decode(z)
    assert y.shape == x.shape and y.abs().max() <= 1
    with pytest.raises(ValueError, match="divisible by 8"):
        ae.encode(torch.zeros(1, 1, 3, 30, 32))
    with pytest.raises(ValueError, match=r"\(b, t, 4, h, w\)"):
        ae.decode(torch.zeros(1, 1, 3, 4, 4))


def test_depth_channel_model():
    ae = tiny_ae(depth_channel=True)
    x = A.frames_to_tensor(synthetic_rgb(2, 32, 0), np.full((2, 32, 32), 2.0, np.float32))
    assert ae.decode(ae.encode(x[None])).shape == (1, 2, 4, 32, 32)


def test_save_load_round_trip_keeps_scale(tmp_path):
    ae = tiny_ae()
    frames = A.frames_to_tensor(synthetic_rgb(8, 32, 1))  # (8, 3, 32, 32)
    shift, scale = A.fit_latent_scale(ae, frames)
    z = ae.encode(frames[None])
    assert float(z.mean()) == pytest.approx(0.0, abs=1e-4)
    assert float(z.std()) == pytest.approx(1.0, abs=1e-4)
    ae.save_pretrained(tmp_path / "ae")
    back = A.VideoAutoencoder.from_pretrained(tmp_path / "ae").eval()
    assert back.config.scaling_factor == pytest.approx(scale)
    assert back.config.shift_factor == pytest.approx(shift)
    assert torch.equal(back.encode(frames[None]), z)


def test_training_reduces_loss_and_raises_psnr():
    ae = tiny_ae()
    rgb = np.concatenate([synthetic_rgb(8, 32, s) for s in range(2)])
    frames = A.frames_to_tensor(rgb)
    before = A.evaluate_autoencoder(ae, frames)
    losses = []
    train = autoencoder_train_config(TINY, steps=40, lr=3e-3, batch_size=8, warmup_steps=2)
    fit(ae, FrameDataset(rgb), train, autoencoder_loss(TINY),
        callbacks=[lambda s: losses.append(s)])
    ae.eval()
    after = A.evaluate_autoencoder(ae, frames)
    assert [s["step"] for s in losses] == list(range(1, 41))
    assert np.mean([s["loss"] for s in losses[-5:]]) < 0.6 * np.mean(
        [s["loss"] for s in losses[:5]])
    assert after["psnr"] > before["psnr"] + 3.0
    assert set(losses[0]) >= {"step", "loss", "lr", "grad_norm", "l1", "mse", "kl"}


def test_encode_store_fills_cache_once(tmp_path):
    store = synthetic_store(tmp_path / "store", episodes=2, t=8, size=32)
    cache = LatentCache(tmp_path / "latents")
    ae = tiny_ae()
    assert A.encode_store(ae, store, cache, batch=3) == 2
    assert A.encode_store(ae, store, cache) == 0  # nothing missing any more
    lat = cache.get(store.ids()[1])
    assert lat.shape == (8, TINY.latent_channels, 4, 4) and lat.dtype == np.float16
    ep = store.read(store.ids()[1])
    direct = ae.encode(A.frames_to_tensor(ep.rgb)[None])[0].half().numpy()
    # batching changes only float rounding (one float16 step at most)
    np.testing.assert_allclose(lat.astype(np.float32), direct.astype(np.float32), atol=2e-3)
