"""fit(), the flow-matching loss, checkpoints, resume and multi-process: tiny and seeded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from worldlab import train as T
from worldlab.cli import main
from worldlab.config import make_config
from worldlab.episodes import EpisodeClips, LatentCache, collate_clips
from worldlab.model.autoencoder import VideoAutoencoder, encode_store
from worldlab.model.dit import WorldModel
from worldlab.model.textenc import CaptionTable
from worldlab.train import checkpoints as C

from fit_accelerate_script import RandomClips
from synthetic_episodes import synthetic_store

HERE = Path(__file__).resolve().parent
CFG = make_config("tiny")
CF = CFG.model.chunk_frames


def tiny_world(seed: int = 0, **overrides) -> WorldModel:
    torch.manual_seed(seed)
    cfg = make_config("tiny", model=overrides).model
    return WorldModel.from_config_dataclass(cfg, 4, 4)


def train_cfg(**kw):
    return make_config("tiny", train=kw).train


def run_fit(out, steps=4, callbacks=(), resume=False, **kw):
    loss_fn = T.world_model_loss(train_cfg(), CF, captions=None)
    return T.fit(tiny_world(), RandomClips(6, 2 * CF, 4, 4), train_cfg(steps=steps, **kw),
                 loss_fn, callbacks=callbacks, out_dir=out, resume=resume)


def params(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


# ----------------------------------------------------------------------------------------
# Pure pieces: seeds, schedules, chunk times
# ----------------------------------------------------------------------------------------


def test_step_generator_and_sampler_depend_only_on_step():
    a = torch.rand(3, generator=T.step_generator(0, 5))
    assert torch.equal(a, torch.rand(3, generator=T.step_generator(0, 5)))
    assert not torch.equal(a, torch.rand(3, generator=T.step_generator(0, 6)))
    assert not torch.equal(a, torch.rand(3, generator=T.step_generator(0, 5, rank=1)))
    full = list(T.StepBatchSampler(10, 4, seed=0, start=0, stop=6))
    assert list(T.StepBatchSampler(10, 4, seed=0, start=3, stop=6)) == full[3:]
    with pytest.raises(ValueError, match="empty"):
        T.StepBatchSampler(0, 4, 0, 0, 1)


def test_lr_schedule_warmup_then_cosine_to_tenth():
    cfg = make_config("small", train={"lr": 1.0, "warmup_steps": 10, "steps": 110}).train
    assert T.lr_at(0, cfg) == pytest.approx(0.1)
    assert T.lr_at(9, cfg) == pytest.approx(1.0)
    assert T.lr_at(60, cfg) == pytest.approx(0.55)  # half way through the cosine
    assert T.lr_at(110, cfg) == pytest.approx(0.1)


def test_chunk_times_teacher_and_diffusion():
    g = torch.Generator().manual_seed(0)
    t, mask = T.chunk_times(3, 4, "teacher", g)
    assert torch.equal(t[:, :-1], torch.zeros(3, 3)) and (t[:, -1] > 0).all()
    assert torch.equal(mask, torch.tensor([[0, 0, 0, 1.0]] * 3))
    t, mask = T.chunk_times(3, 4, "diffusion", g)
    assert ((t > 0) & (t < 1)).all() and mask.sum() == 12
    assert len(set(t.flatten().tolist())) == 12  # independent per chunk
    u = T.sample_flow_time((20000,), torch.Generator().manual_seed(1))
    assert float(u.mean()) == pytest.approx(0.5, abs=0.01)  # logit-normal is symmetric
    assert float(((u > 0.25) & (u < 0.75)).float().mean()) > 0.6  # and peaked at the middle
    with pytest.raises(ValueError, match="forcing 'bogus'"):
        T.chunk_times(1, 2, "bogus", g)
    with pytest.raises(ValueError, match="schedule 'cosine'"):
        T.sample_flow_time((2,), g, "cosine")


def test_flow_loss_golden_for_zero_velocity_model():
    # a fresh WorldModel has a zero-initialised output: v = 0, so the loss is E|noise - x0|^2
    model = tiny_world()
    x0 = torch.zeros(2, 2 * CF, 4, 4, 4)
    g = torch.Generator().manual_seed(0)
    cond = {"actions": torch.zeros(2, 2 * CF, 7), "c2w": torch.eye(4).expand(2, 2 * CF, 4, 4)}
    loss, _ = T.flow_matching_loss(model, x0, chunk_frames=CF, generator=g, forcing="teacher",
                                   **cond)
    g = torch.Generator().manual_seed(0)
    T.chunk_times(2, 2, "teacher", g)  # replay the generator up to the noise
    noise = torch.randn(x0.shape, generator=g)
    assert loss.item() == pytest.approx(noise[:, CF:].pow(2).mean().item(), rel=1e-5)
    with pytest.raises(ValueError, match="multiple of chunk_frames"):
        T.flow_matching_loss(model, x0[:, :3], chunk_frames=CF, generator=g)


# ----------------------------------------------------------------------------------------
# fit
# ----------------------------------------------------------------------------------------


def test_overfit_one_batch_with_captions(tmp_path):
    store = synthetic_store(tmp_path / "store", episodes=1, t=2 * CF, size=32)
    cache = LatentCache(tmp_path / "latents")
    torch.manual_seed(0)
    encode_store(VideoAutoencoder.from_config_dataclass(CFG.autoencoder).eval(), store, cache)
    clips = EpisodeClips(store, clip_frames=2 * CF, chunk_frames=CF, latents=cache)
    captions = CaptionTable()
    cfg = train_cfg(steps=40, lr=3e-3, warmup_steps=2, batch_size=2, text_dropout=0.0)
    losses = []
    T.fit(tiny_world(), clips, cfg, T.world_model_loss(cfg, CF, captions),
          callbacks=[lambda s: losses.append(s["loss"])], collate_fn=collate_clips)
    assert len(captions.table) == 2  # two distinct captions, each encoded once
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])


def test_checkpoint_round_trip_and_final_outputs(tmp_path):
    state = run_fit(tmp_path, steps=4, keep_checkpoints=1)
    assert [p.name for p in C.list_checkpoints(tmp_path)] == ["step_00000004"]
    model, opt = tiny_world(seed=1), None
    opt = torch.optim.AdamW(model.parameters())
    ema = tiny_world(seed=2)
    meta = C.load_checkpoint(C.latest_checkpoint(tmp_path), model, opt, ema)
    assert meta["step"] == 4 and meta["world_size"] == 1
    assert torch.equal(params(model), params(state["model"]))
    assert torch.equal(params(ema), params(state["ema"]))
    assert not torch.equal(params(ema), params(model))  # EMA lags the weights
    final = WorldModel.from_pretrained(tmp_path / "model")
    assert torch.equal(params(final), params(state["model"]))
    assert len(opt.state) == len(list(model.parameters()))


class Interrupt(Exception):
    pass


def stop_at(step: int):
    def cb(state):
        if state["step"] == step:
            raise Interrupt
    return cb


def test_resume_is_bit_identical(tmp_path):
    straight = run_fit(tmp_path / "a", steps=4)
    with pytest.raises(Interrupt):  # crash right after the step-2 checkpoint
        run_fit(tmp_path / "b", steps=4, callbacks=[stop_at(2)])
    assert C.latest_checkpoint(tmp_path / "b").name == "step_00000002"
    seen = []
    resumed = run_fit(tmp_path / "b", steps=4, resume=True,
                      callbacks=[lambda s: seen.append(s["step"])])
    assert seen == [3, 4]
    assert torch.equal(params(resumed["model"]), params(straight["model"]))
    assert torch.equal(params(resumed["ema"]), params(straight["ema"]))
    assert resumed["loss"] == straight["loss"]


def test_failed_save_leaves_previous_checkpoint(tmp_path, monkeypatch):
    run_fit(tmp_path, steps=2)
    before = load_file(str(C.latest_checkpoint(tmp_path) / "optimizer.safetensors"))

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(C, "save_file", disk_full)  # fail after model/ and ema/ are written
    with pytest.raises(OSError, match="No space"):
        run_fit(tmp_path, steps=4, resume=True)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["step_00000002"]  # no step_4, no leftover temporary directory
    after = load_file(str(C.latest_checkpoint(tmp_path) / "optimizer.safetensors"))
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_config_mismatch_names_the_field(tmp_path):
    run_fit(tmp_path, steps=2)
    model = tiny_world(width=64, heads=2)
    opt = torch.optim.AdamW(model.parameters())
    with pytest.raises(ValueError, match="width=32 but the model has width=64"):
        C.load_checkpoint(C.latest_checkpoint(tmp_path), model, opt)
    with pytest.raises(ValueError, match="not a checkpoint"):
        C.load_checkpoint(tmp_path, model, opt)


def test_load_transformer_takes_all_but_the_tokeniser(tmp_path):
    """A world on other latents (8 channels of 8x8 at patch 2 for the tiny world's 4 of 4x4 at
    patch 1: the same 4x4 token grid) takes every block of a saved world, keeps its own
    tokeniser, and starts at velocity 0 whatever it is shown."""
    tiny_world(seed=1).save_pretrained(tmp_path / "old")
    old = tiny_world(seed=1).state_dict()
    cfg = make_config("tiny", model={"patch_size": 2}).model
    torch.manual_seed(2)
    new = WorldModel.from_config_dataclass(cfg, 8, 8)
    fresh = {k: v.clone() for k, v in new.state_dict().items()}
    C.load_transformer(new, tmp_path / "old")
    for name, value in new.state_dict().items():
        want = fresh[name] if name in C.TOKENISER else old[name]
        assert torch.equal(value, want), name
    x, t = torch.randn(1, 2 * CF, 8, 8, 8), torch.tensor([[0.0, 0.5]])
    with torch.no_grad():
        v = new(x, t, actions=torch.zeros(1, 2 * CF, 7), c2w=torch.eye(4).repeat(1, 2 * CF, 1, 1))
    assert v.shape == x.shape and not v.any()


@pytest.mark.parametrize("model, match", [
    (dict(patch_size=4), r"a 4x4 token grid .* this model's is 2x2 \(latent_size 8 / "
                         r"patch_size 4\)"),
    (dict(patch_size=2, width=64), "width=32 but the model has width=64"),
])
def test_load_transformer_refuses_another_body_and_changes_nothing(tmp_path, model, match):
    tiny_world().save_pretrained(tmp_path / "old")
    new = WorldModel.from_config_dataclass(make_config("tiny", model=model).model, 8, 8)
    before = {k: v.clone() for k, v in new.state_dict().items()}
    with pytest.raises(ValueError, match=match):
        C.load_transformer(new, tmp_path / "old")
    assert all(torch.equal(v, before[k]) for k, v in new.state_dict().items())
    with pytest.raises(ValueError, match="not a save_pretrained directory"):
        C.load_transformer(new, tmp_path)


def test_bad_train_config_and_device():
    with pytest.raises(ValueError, match="steps must be >= 1"):
        run_fit(None, steps=0)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        T.make_accelerator(train_cfg(), "tpu")


# ----------------------------------------------------------------------------------------
# Multi-process and the CLI
# ----------------------------------------------------------------------------------------


def test_two_processes_end_with_identical_parameters(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parent)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           "2", str(HERE / "fit_accelerate_script.py"), str(tmp_path)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rank 1 of 2" in done.stdout
    r0, r1 = (load_file(str(tmp_path / f"rank{i}.safetensors")) for i in (0, 1))
    assert torch.equal(r0["params"], r1["params"])  # DDP kept the ranks in lock-step
    assert not torch.equal(r0["loss"], r1["loss"])  # ... while each drew its own batches
    assert C.latest_checkpoint(tmp_path / "run").name == "step_00000002"


def test_cli_trains_autoencoder_then_world(tmp_path, capsys):
    synthetic_store(tmp_path / "store", episodes=3, t=2 * CF, size=32)
    common = ["--preset", "tiny", "--data", str(tmp_path / "store"), "--device", "cpu",
              "--steps", "3"]
    assert main(["train", "autoencoder", *common, "--out", str(tmp_path / "ae")]) == 0
    assert "held-out (1 episodes): PSNR" in capsys.readouterr().out
    assert (tmp_path / "ae" / "metrics.json").exists()
    # the autoencoder's seed is its own section's; a train__ override would go unread
    assert main(["train", "autoencoder", *common, "--out", str(tmp_path / "ae1"),
                 "--set", "autoencoder__seed=1"]) == 0
    seeded = [json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("ae", "ae1")]
    assert seeded[0] != seeded[1]  # other starting weights, other batches
    with pytest.raises(ValueError, match="--set train__seed: .* set autoencoder__seed"):
        main(["train", "autoencoder", *common, "--out", str(tmp_path / "ae2"),
              "--set", "train__seed=1"])
    assert not (tmp_path / "ae2").exists()
    assert main(["train", "world", *common, "--out", str(tmp_path / "wm"), "--no-text",
                 "--autoencoder", str(tmp_path / "ae" / "model")]) == 0
    assert "encoded 3 episodes" in capsys.readouterr().out
    assert WorldModel.from_pretrained(tmp_path / "wm" / "model").config.latent_size == 4
    # the run's config says what it was trained on, not the preset's recording defaults
    data = json.loads((tmp_path / "wm" / "world_config.json").read_text())["data"]
    assert (data["episodes"], data["frames"], data["size"]) == (3, 2 * CF, 32)
    with pytest.raises(ValueError, match="latent cache .* is incomplete"):
        main(["train", "world", *common, "--out", str(tmp_path / "wm2"),
              "--latents", str(tmp_path / "empty")])
    # a new stage from those weights with a longer context window (no weight depends on it)
    init = ["--out", str(tmp_path / "wm3"), "--no-text", "--init", str(tmp_path / "wm" / "ema")]
    assert main(["train", "world", *common, *init, "--set", "model__window_chunks=3",
                 "--set", "data__clip_chunks=2"]) == 0
    assert WorldModel.from_pretrained(tmp_path / "wm3" / "ema").config.window_chunks == 3
    with pytest.raises(ValueError, match="width=.* but the model has width=48"):
        main(["train", "world", *common, *init, "--set", "model__width=48"])
    # --init with --resume continues the run in --out (its checkpoint's config must match)
    with pytest.raises(ValueError, match="has window_chunks=3 but the model has window_"):
        main(["train", "world", *common, *init, "--resume"])
    with pytest.raises(ValueError, match="pass one"):
        main(["train", "world", *common, *init, "--init-transformer", str(tmp_path / "wm")])
    # the same world's transformer under a new tokeniser: a new stage on other latents
    assert main(["train", "world", *common, "--out", str(tmp_path / "wm4"), "--no-text",
                 "--init-transformer", str(tmp_path / "wm" / "ema")]) == 0


def test_recipes_are_reproducible_and_report_their_plan(tmp_path):
    """The same config starts from the same weights whatever ran before (seeded init), so
    two runs of a recipe give identical models; `on_start` gets the plan, callbacks every
    step."""
    from worldlab.train import recipes

    store = synthetic_store(tmp_path / "store", episodes=3, t=2 * CF, size=32)
    cfg = make_config("tiny", autoencoder__steps=2, train__steps=2)
    plans, states = [], []
    ae = recipes.autoencoder(store, cfg.autoencoder, on_start=plans.append,
                             callbacks=[states.append])
    torch.rand(5)  # the global RNG moves on; the next run must not care
    again = recipes.autoencoder(store, cfg.autoencoder)
    assert ae.scores == again.scores and ae.held_ids == again.held_ids == store.ids()[-1:]
    assert plans[0]["steps"] == 2 and [s["step"] for s in states] == [1, 2]
    runs = [recipes.world(store, cfg, autoencoder=ae.model, latents=tmp_path / "lat",
                          ids=store.ids()[:2], text=False) for _ in range(2)]
    for a, b in zip(runs[0].ema.parameters(), runs[1].ema.parameters()):
        assert torch.equal(a, b)
    assert runs[0].config.data.episodes == 2 and runs[0].captions is None
