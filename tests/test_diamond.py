"""The DIAMOND-style peer baseline: model (EDM preconditioning, sampler), save/load, the
training recipe and CLI, and the predictor."""

import json

import numpy as np
import pytest
import torch

from worldlab.cli import main
from worldlab.episodes import EpisodeStore, record_many
from worldlab.evaluate.peer import DiamondPredictor, load_peer
from worldlab.loading import load_module
from worldlab.model.diamond import (
    DiamondConfig,
    DiamondUNet,
    diamond_loss,
    edm_sigmas,
    sample_next,
)
from worldlab.train.diamond import NextFrameSamples, planned_steps

SIZE = 32
TINY = {"size": SIZE, "channels": (16, 32), "blocks": 1, "cond_dim": 32, "norm_groups": 8,
        "attention_heads": 2}


def tiny(seed=0, randomise_out=False) -> DiamondUNet:
    torch.manual_seed(seed)
    model = DiamondUNet(**TINY)
    if randomise_out:  # the zero-initialised output conv would make F = 0 and tests trivial
        torch.nn.init.normal_(model.conv_out.weight, std=0.1)
        for block in model.modules():
            if hasattr(block, "modulation"):
                torch.nn.init.normal_(block.modulation.weight, std=0.1)
                torch.nn.init.normal_(block.conv2.weight, std=0.05)
    return model.eval()


def inputs(b=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(b, 3, SIZE, SIZE, generator=g) * 2 - 1
    ctx = torch.rand(b, 12, SIZE, SIZE, generator=g) * 2 - 1
    act = torch.zeros(b, 7)
    act[:, 0], act[:, 2] = 0.3, -10.0
    return x, ctx, act


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = EpisodeStore(tmp_path_factory.mktemp("peer") / "data")
    record_many(s, "procedural", [0, 1], 16, SIZE, "mix", workers=1)
    return s


def test_default_size_and_shapes():
    n = sum(p.numel() for p in DiamondUNet().parameters())
    assert 2e6 < n < 4e6, n  # about the shipped world's DiT (1.8 M), a few times at most
    model, (x, ctx, act) = tiny(randomise_out=True), inputs()
    out = model.denoise(x, torch.tensor([0.5, 2.0]), ctx, act)
    assert out.shape == (2, 3, SIZE, SIZE) and torch.isfinite(out).all()
    with pytest.raises(ValueError, match="context has shape"):
        model.denoise(x, 0.5, ctx[:, :9], act)


def test_edm_preconditioning():
    model, (x, ctx, act) = tiny(randomise_out=True), inputs()
    sigma = torch.tensor([1e-6, 0.5, 80.0])
    c_skip, c_out, c_in, c_noise = model.preconditioning(sigma)
    s = model.cfg.sigma_data
    assert torch.allclose(c_in.flatten() ** 2 * (sigma ** 2 + s ** 2), torch.ones(3))
    assert abs(c_skip[0].item() - 1) < 1e-9 and c_out[0].item() < 1e-6  # sigma -> 0
    assert c_skip[2].item() < 1e-4 and abs(c_out[2].item() - s) < 1e-3  # sigma -> inf
    assert torch.allclose(c_noise, sigma.log() / 4)
    f = model(c_in[1:2] * x[:1], ctx[:1], c_noise[1:2], act[:1], torch.zeros(1))
    assert f.abs().mean() > 1e-3  # F is not trivially zero, so the next line tests c_skip
    out = model.denoise(x, 1e-6, ctx, act)
    assert (out - x).abs().max() < 1e-5


def test_schedule_and_sampler_are_seeded():
    cfg = DiamondConfig(**TINY)
    sig = edm_sigmas(cfg, 3)
    assert sig[0] == pytest.approx(cfg.sigma_max) and sig[2] == pytest.approx(cfg.sigma_min)
    assert sig[-1] == 0 and bool((sig[:-1] > sig[1:]).all())
    model, (_, ctx, act) = tiny(randomise_out=True), inputs()
    for solver in ("euler", "heun"):
        a = sample_next(model, ctx, act, 3, torch.Generator().manual_seed(1), solver)
        b = sample_next(model, ctx, act, 3, torch.Generator().manual_seed(1), solver)
        assert a.shape == (2, 3, SIZE, SIZE) and torch.equal(a, b)
        assert a.min() >= -1 and a.max() <= 1


def test_config_names_bad_values():
    for name, bad in (("norm_groups", 5), ("size", 30), ("channels", ()),
                      ("sigma_min", 9.0), ("action_scale", (1.0,))):
        with pytest.raises(ValueError, match=name):
            DiamondConfig(**{**TINY, name: bad})


def test_save_load_round_trip(tmp_path):
    model, (x, ctx, act) = tiny(randomise_out=True), inputs()
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    loaded = load_module(DiamondUNet, tmp_path / "m")
    assert loaded.cfg == model.cfg
    sigma = torch.tensor([0.3, 1.5])
    assert torch.equal(model.denoise(x, sigma, ctx, act), loaded.denoise(x, sigma, ctx, act))
    peer = load_peer(tmp_path / "m")
    assert torch.equal(peer.model.denoise(x, sigma, ctx, act), model.denoise(x, sigma, ctx, act))


def test_malformed_or_missing_files_are_named(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_peer(tmp_path / "nowhere")
    tiny().save_pretrained(tmp_path / "m", safe_serialization=True)
    cfg_file = tmp_path / "m" / "config.json"
    good = json.loads(cfg_file.read_text())
    cfg_file.write_text(json.dumps({**good, "norm_groups": 5}))
    with pytest.raises(ValueError, match="config.json.*norm_groups"):
        load_peer(tmp_path / "m")
    cfg_file.write_text("{not json")
    with pytest.raises(ValueError, match="config.json"):
        load_peer(tmp_path / "m")
    cfg_file.write_text(json.dumps(good))
    (tmp_path / "m" / "diffusion_pytorch_model.safetensors").unlink()
    with pytest.raises(ValueError, match="diffusion_pytorch_model.safetensors"):
        load_peer(tmp_path / "m")


def test_loss_decreases_when_overfitting_one_batch():
    torch.manual_seed(0)
    model = DiamondUNet(**TINY).train()
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, SIZE), torch.linspace(-1, 1, SIZE),
                            indexing="ij")
    y = 0.8 * torch.stack([torch.stack([torch.sin(3 * xx + i), torch.cos(2 * yy - i), xx * yy])
                           for i in range(4)])  # (4, 3, h, w): smooth frames to memorise
    ctx, act = y.repeat(1, 4, 1, 1), torch.zeros(4, 7)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def held():  # the loss at fixed noise draws, before and after
        with torch.no_grad():
            return np.mean([float(diamond_loss(model, y, ctx, act,
                                               torch.Generator().manual_seed(99 + s)))
                            for s in range(4)])

    before = held()
    for step in range(30):
        loss = diamond_loss(model, y, ctx, act, torch.Generator().manual_seed(step))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert held() < 0.7 * before, (before, held())


def test_samples_pair_context_action_and_target(store):
    ids = sorted(store.index)
    data = NextFrameSamples(store, ids, 4)
    assert len(data) == 2 * (16 - 4)
    batch = data.gather([0, 12])
    ep = store.read(ids[1])  # sample 12 is the second episode's t = 4
    assert batch["context"].shape == (2, 12, SIZE, SIZE)
    assert torch.equal(batch["target"][1], torch.from_numpy(ep.rgb[4]).permute(2, 0, 1)
                       .float() / 127.5 - 1)
    assert torch.equal(batch["context"][1, :3], torch.from_numpy(ep.rgb[0]).permute(2, 0, 1)
                       .float() / 127.5 - 1)
    assert torch.equal(batch["action"][1], torch.from_numpy(ep.actions[4]))


def test_planned_steps_survive_a_resume(tmp_path):
    assert planned_steps(tmp_path, False, None, 1.0, lambda: 77) == 77
    assert planned_steps(tmp_path, True, None, 1.0, lambda: 5) == 77  # the saved plan
    assert planned_steps(tmp_path, False, 9, None, lambda: 5) == 9
    with pytest.raises(ValueError, match="not both"):
        planned_steps(tmp_path, False, 9, 1.0, lambda: 5)


def test_predict_shape_and_seed(store):
    ep = store.read(min(store.index))
    peer = DiamondPredictor(tiny(randomise_out=True), steps=2)
    assert (peer.size, peer.chunk_frames, peer.name) == (SIZE, 4, "diamond")
    out = peer.predict(ep, 2, 4, 10, seed=3)
    assert out.shape == (6, SIZE, SIZE, 3) and out.dtype == np.uint8
    assert np.array_equal(out, peer.predict(ep, 2, 4, 10, seed=3))
    assert not np.array_equal(out, peer.predict(ep, 2, 4, 10, seed=4))
    assert peer.predict(ep, 0, 2, 5, seed=0).shape == (3, SIZE, SIZE, 3)  # padded context
    with pytest.raises(ValueError, match="actions"):
        peer.predict(ep, 0, 4, 8, actions=np.zeros((3, 7), np.float32))


def test_cli_trains_and_writes_a_loadable_peer(store, tmp_path, capsys):
    out = tmp_path / "peer"
    args = ["train", "diamond", "--data", str(store.root), "--out", str(out), "--steps", "3",
            "--batch-size", "2", "--device", "cpu", "--seed", "1"]
    assert main(args) == 0
    run = json.loads((out / "train_run.json").read_text())
    assert run["steps"] == 3 and run["data"] == str(store.root) and run["samples"] == 24
    for sub in ("model", "ema"):
        peer = load_peer(out / sub, steps=1)
        assert peer.size == SIZE
    ep = store.read(sorted(store.index)[1])
    assert peer.predict(ep, 0, 4, 6).shape == (2, SIZE, SIZE, 3)
    assert main(args + ["--resume"]) == 0  # nothing left to do: the plan is kept
    assert json.loads((out / "train_plan.json").read_text())["steps"] == 3
