"""Tracked runs: fit logs its scalars to TensorBoard under the run's out dir (accelerate's
tracker), a config switch turns it off, and a resumed run shows one curve. Tiny and seeded."""

from __future__ import annotations

import threading

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from worldlab import train as T
from worldlab.config import make_config
from worldlab.train import checkpoints as C
from worldlab.train.loop import TENSORBOARD_DIR

from test_training import Interrupt, run_fit, stop_at, train_cfg


def event_files(root):
    return sorted(root.rglob("events.out.tfevents.*"))


def logged(out, tag="train/loss") -> list[tuple[int, float]]:
    """(step, value) of a scalar as TensorBoard reads the run (purges applied)."""
    acc = EventAccumulator(str(out / TENSORBOARD_DIR))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_fit_logs_the_callbacks_scalars_to_tensorboard(tmp_path):
    seen = []
    threads = set(threading.enumerate())
    run_fit(tmp_path, steps=3, callbacks=[seen.append])
    assert event_files(tmp_path) and all((tmp_path / TENSORBOARD_DIR) in f.parents
                                         for f in event_files(tmp_path))
    loss = logged(tmp_path)
    assert [s for s, _ in loss] == [1, 2, 3]
    assert [v for _, v in loss] == pytest.approx([s["loss"] for s in seen], rel=1e-6)
    assert [v for _, v in logged(tmp_path, "train/lr")] == pytest.approx(
        [s["lr"] for s in seen], rel=1e-6)
    assert {"train/grad_norm", "train/data_s", "train/t_mean"} <= set(
        EventAccumulator(str(tmp_path / TENSORBOARD_DIR)).Reload().Tags()["scalars"])
    left = [t for t in set(threading.enumerate()) - threads if t.is_alive()]
    assert not left, f"fit left threads running: {left}"  # the writer was closed


def test_switch_off_writes_no_events(tmp_path):
    run_fit(tmp_path, steps=2, tensorboard=False)
    assert event_files(tmp_path) == [] and not (tmp_path / TENSORBOARD_DIR).exists()
    assert C.latest_checkpoint(tmp_path).name == "step_00000002"  # the run itself did run


def test_no_out_dir_no_events(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_fit(None, steps=2)
    assert event_files(tmp_path) == []


def test_resumed_run_shows_one_curve_and_keeps_checkpoints(tmp_path):
    with pytest.raises(Interrupt):  # crash after step 3 was logged, checkpoint at step 2
        run_fit(tmp_path, steps=5, checkpoint_every=2, callbacks=[stop_at(3)])
    assert C.latest_checkpoint(tmp_path).name == "step_00000002"
    assert [s for s, _ in logged(tmp_path)] == [1, 2, 3]  # the crashed try closed its file
    seen = []
    run_fit(tmp_path, steps=5, checkpoint_every=2, resume=True, callbacks=[seen.append])
    assert [s["step"] for s in seen] == [3, 4, 5]
    loss = logged(tmp_path)
    assert [s for s, _ in loss] == [1, 2, 3, 4, 5]  # step 3 of the crashed try purged
    assert [v for _, v in loss[2:]] == pytest.approx([s["loss"] for s in seen], rel=1e-6)
    assert len(event_files(tmp_path)) == 2
    assert [p.name for p in C.list_checkpoints(tmp_path)] == [
        "step_00000002", "step_00000004", "step_00000005"]


def test_make_accelerator_tracks_only_with_out_and_the_switch(tmp_path):
    on, off = train_cfg(), train_cfg(tensorboard=False)
    assert T.make_accelerator(on, "cpu", tmp_path).log_with
    assert not T.make_accelerator(on, "cpu").log_with
    assert not T.make_accelerator(off, "cpu", tmp_path).log_with


def test_missing_tensorboard_is_named(tmp_path, monkeypatch):
    import accelerate.utils

    monkeypatch.setattr(accelerate.utils, "is_tensorboard_available", lambda: False)
    with pytest.raises(ImportError, match="train.tensorboard=True needs the tensorboard"):
        T.make_accelerator(train_cfg(), "cpu", tmp_path)


def test_bad_switch_value_is_named():
    with pytest.raises(ValueError, match="tensorboard"):
        make_config("tiny", train={"tensorboard": "yes"})


def test_recipes_draw_samples_at_each_checkpoint(tmp_path):
    """The autoencoder's held-out frames over their reconstructions, and the world's
    next chunks under the engine's, as the TensorBoard image "samples" at every checkpoint."""
    from synthetic_episodes import synthetic_store
    from worldlab.cli import main
    synthetic_store(tmp_path / "store", episodes=3, size=32,
                    t=2 * make_config("tiny").model.chunk_frames)
    common = ["--preset", "tiny", "--data", str(tmp_path / "store"), "--device", "cpu",
              "--steps", "2"]
    assert main(["train", "autoencoder", *common, "--out", str(tmp_path / "ae")]) == 0
    assert main(["train", "world", *common, "--set", "train__checkpoint_every=1", "--no-text",
                 "--autoencoder", str(tmp_path / "ae" / "model"), "--out",
                 str(tmp_path / "wm")]) == 0
    for run, steps in (("ae", [2]), ("wm", [1, 2])):  # the autoencoder saves at its end
        events = EventAccumulator(str(tmp_path / run / TENSORBOARD_DIR),
                                  size_guidance={"images": 0})
        events.Reload()
        images = events.Images("samples")
        assert [i.step for i in images] == steps
        assert images[0].height == 2 * 32 + 1  # the engine's row over the model's
