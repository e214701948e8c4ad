"""The fast decoder: shapes and range, save/load, distillation on cached latents, the
`sample.decoder` switch of a world, and clear errors for a world without one or with one
of other latents. A tiny untrained world (tiny preset, 32x32 frames, 4 latent channels)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from synthetic_episodes import synthetic_store

import worldlab as wl
from worldlab.episodes import LatentCache
from worldlab.loading import load_module
from worldlab.model.autoencoder import encode_store, tensor_to_frames
from worldlab.model.fast_decoder import FastDecoder
from worldlab.pretrained import load_world, package_world
from worldlab.train import decoder_train_config, distill_decoder

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def ae(world_dir):
    return load_world(world_dir, device="cpu").ae


def fresh(ae, seed: int = 0, **overrides) -> FastDecoder:
    """A seeded FastDecoder for `ae`, its config changed by `overrides`."""
    config = {**FastDecoder.for_autoencoder(ae).config, **overrides}
    torch.manual_seed(seed)
    return FastDecoder.from_config(config).eval()


def latents(ae, b: int = 2, t: int = 3) -> torch.Tensor:
    side = 32 // ae.downsample
    return torch.randn(b, t, ae.config.latent_channels, side, side,
                       generator=torch.Generator().manual_seed(1))  # (b, t, c, h', w')


def with_fast_decoder(world_dir, tmp_path, fast: FastDecoder, config=None):
    """A packaged copy of the tiny world with `fast` as its fast decoder."""
    fast.save_pretrained(tmp_path / "fast")
    return package_world(world_dir / "autoencoder", world_dir / "world",
                         config or world_dir / "world_config.json", tmp_path / "packed",
                         half=False, fast_decoder=tmp_path / "fast")


# ----------------------------------------------------------------------------------------
# The module
# ----------------------------------------------------------------------------------------


def test_decode_matches_the_full_decoders_shape_and_range(ae):
    fast, z = fresh(ae), latents(ae)
    assert fast.downsample == ae.downsample == 8
    assert fast.config.block_out_channels == (128, 64, 32)
    y = fast.decode(z * 10)  # far outside the latents' range: still clamped frames
    assert y.shape == ae.decode(z).shape == (2, 3, 3, 32, 32)
    assert float(y.min()) >= -1 and float(y.max()) <= 1
    assert fast(z[:, 0]).shape == (2, 3, 32, 32)  # the training pass, on single latents


def test_decode_rejects_latents_of_another_layout(ae):
    fast, z = fresh(ae), latents(ae)
    with pytest.raises(ValueError,
                       match=r"expected latents \(b, t, 4, h, w\), got \(2, 4, 4, 4\)"):
        fast.decode(z[:, 0])
    with pytest.raises(ValueError, match=r"got \(2, 3, 5, 4, 4\)"):
        fast.decode(torch.cat([z, z[:, :, :1]], 2))


def test_bad_architecture_is_named():
    with pytest.raises(ValueError, match=r"block_out_channels \(\), layers_per_block 1"):
        FastDecoder(block_out_channels=(), layers_per_block=1)


def test_save_load_round_trip(ae, tmp_path):
    fast, z = fresh(ae, seed=3), latents(ae)
    fast.save_pretrained(tmp_path / "fd")
    assert sorted(p.name for p in (tmp_path / "fd").iterdir()) == [
        "config.json", "diffusion_pytorch_model.safetensors"]
    back = load_module(FastDecoder, tmp_path / "fd")
    assert torch.equal(back.decode(z), fast.decode(z))


# ----------------------------------------------------------------------------------------
# Distillation
# ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data(tmp_path_factory, ae):
    root = tmp_path_factory.mktemp("data")
    store = synthetic_store(root / "store", episodes=3, t=8, size=32)
    cache = LatentCache(root / "latents")
    encode_store(ae, store, cache)  # as the world's encoder would
    return store, cache


@pytest.mark.parametrize("target", ["frames", "decoder"])
def test_a_few_steps_reduce_the_loss(world_dir, data, tmp_path, target):
    store, cache = data
    losses = []
    cfg = decoder_train_config(steps=24, batch_size=8, warmup_steps=2, checkpoint_every=12)
    run = distill_decoder(world_dir, store, cache, tmp_path / "run", target=target, cfg=cfg,
                          device="cpu", callbacks=[lambda s: losses.append(s["loss"])])
    assert len(losses) == 24 and np.mean(losses[-4:]) < 0.8 * np.mean(losses[:4])
    assert run.held_ids == [store.ids()[-1]] and run.state["step"] == 24
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["target"] == target and saved["frames"] == 8
    assert {"full_psnr", "fast_psnr", "full_ssim", "fast_ssim", "fast_vs_full_psnr"} <= set(saved)
    back = load_module(FastDecoder, tmp_path / "run" / "model")
    z = torch.from_numpy(cache.get(store.ids()[0])[:4].astype(np.float32))[None]
    assert torch.equal(back.decode(z), run.model.decode(z))


def test_distillation_refuses_a_decoder_of_other_latents(world_dir, data, ae):
    store, cache = data
    with pytest.raises(ValueError, match="distill_decoder.*reads 8 latent channels.*makes 4"):
        distill_decoder(world_dir, store, cache, decoder=fresh(ae, latent_channels=8),
                        cfg=decoder_train_config(steps=1), device="cpu")
    with pytest.raises(ValueError, match="unknown target 'engine'"):
        distill_decoder(world_dir, store, cache, target="engine",
                        cfg=decoder_train_config(steps=1), device="cpu")


# ----------------------------------------------------------------------------------------
# The switch
# ----------------------------------------------------------------------------------------


def test_the_switch_picks_the_decoder(world_dir, ae, tmp_path):
    fast, z = fresh(ae, seed=5), latents(ae, b=1)
    packed = with_fast_decoder(world_dir, tmp_path, fast)
    world = load_world(packed, device="cpu")  # the config says "full"
    assert world.config.sample.decoder == "full" and world.decoder is world.ae
    assert np.array_equal(world.decode(z), tensor_to_frames(ae.decode(z)[0]))
    world.config.sample.decoder = "fast"  # switched in a live world
    assert np.array_equal(world.decode(z), tensor_to_frames(fast.decode(z)[0]))
    world = load_world(packed, device="cpu", decoder="fast")
    assert world.decoder is world.fast_decoder
    assert np.array_equal(world.decode(z), tensor_to_frames(fast.decode(z)[0]))


def test_the_config_chooses_and_the_argument_overrides(world_dir, ae, tmp_path):
    cfg = wl.make_config("tiny", data__engine="procedural", sample__decoder="fast")
    (tmp_path / "fast_config.json").write_text(cfg.to_json())
    packed = with_fast_decoder(world_dir, tmp_path, fresh(ae), tmp_path / "fast_config.json")
    world = load_world(packed, device="cpu")
    assert world.config.sample.decoder == "fast" and world.decoder is world.fast_decoder
    world = load_world(packed, device="cpu", decoder="full")
    assert world.config.sample.decoder == "full" and world.decoder is world.ae


def test_packaging_can_make_the_fast_decoder_the_default(world_dir, ae, tmp_path):
    fast = fresh(ae)
    fast.save_pretrained(tmp_path / "fast")
    parts = (world_dir / "autoencoder", world_dir / "world", world_dir / "world_config.json")
    packed = package_world(*parts, tmp_path / "packed", half=False,
                           fast_decoder=tmp_path / "fast", sample={"decoder": "fast"})
    world = load_world(packed, device="cpu")
    assert world.config.sample.decoder == "fast" and world.decoder is world.fast_decoder
    before = json.loads((world_dir / "world_config.json").read_text())
    after = json.loads((packed / "world_config.json").read_text())
    assert after == {**before, "sample": {**before["sample"], "decoder": "fast"}}
    with pytest.raises(ValueError, match="sample.decoder='fast' needs a fast decoder"):
        package_world(*parts, tmp_path / "none", sample={"decoder": "fast"})
    with pytest.raises(ValueError, match="decoder"):
        package_world(*parts, tmp_path / "none", sample={"decoder": "tiny"})
    assert not (tmp_path / "none").exists()  # nothing written


def test_fast_asked_of_a_world_without_one_is_named(world_dir):
    missing = re.escape(f"{world_dir / 'fast_decoder'} does not exist (expected a FastDecoder")
    with pytest.raises(ValueError, match=missing):
        load_world(world_dir, device="cpu", decoder="fast")
    with pytest.raises(ValueError, match=r"decoder must be one of \('full', 'fast'\).*'tiny'"):
        load_world(world_dir, device="cpu", decoder="tiny")
    world = load_world(world_dir, device="cpu")
    assert world.fast_decoder is None
    world.config.sample.decoder = "fast"
    with pytest.raises(ValueError, match="has no fast decoder"):
        world.decode(latents(world.ae, b=1))


def test_a_fast_decoder_of_other_latents_is_refused(world_dir, ae, tmp_path):
    bad = fresh(ae, latent_channels=8)
    with pytest.raises(ValueError, match=r"fast: the fast decoder reads 8 latent channels.*"
                                         r"autoencoder makes 4"):
        with_fast_decoder(world_dir, tmp_path, bad)
    assert not (tmp_path / "packed").exists()  # nothing half written
    good = with_fast_decoder(world_dir, tmp_path, fresh(ae))
    bad.save_pretrained(good / "fast_decoder")  # a world that was edited by hand
    with pytest.raises(ValueError, match="fast_decoder: the fast decoder reads 8 latent"):
        load_world(good, device="cpu")
