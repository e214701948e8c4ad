"""The depth head of the "own" 3D cache: `predict`'s shapes, range and input checks, that it
learns a known depth (two flat colours at two depths), save/load, the held-out scores on
known numbers, and the recipe and `train depth-head` end to end on a tiny synthetic store
(32 px frames: depth 3 m, the top quarter `inf`)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from synthetic_episodes import synthetic_store

from worldlab.cli import main
from worldlab.model.autoencoder import frames_to_tensor
from worldlab.model.depth_head import MIN_DEPTH_M, DepthHead
from worldlab.train.checkpoints import save_model_dir
from worldlab.train.depth_head import (depth_loss, depth_scores, load_depth_head,
                                       log_depth_target, pick_episodes, train_depth_head)
from worldlab.train.recipes import seeded

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def frames(n: int = 5, size: int = 32, seed: int = 0) -> np.ndarray:
    """Random uint8 frames (n, size, size, 3)."""
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def two_depths(n: int = 8, size: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Frames (n, size, size, 3) split at a column that moves with the frame: red on the
    left at 2 m, blue on the right at 8 m; and that depth (n, size, size)."""
    rgb = np.zeros((n, size, size, 3), np.uint8)
    depth = np.empty((n, size, size), np.float32)
    for i in range(n):
        cut = 4 + i * (size - 8) // max(1, n - 1)
        rgb[i, :, :cut, 0], depth[i, :, :cut] = 220, 2.0
        rgb[i, :, cut:, 2], depth[i, :, cut:] = 220, 8.0
    return rgb, depth


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return synthetic_store(tmp_path_factory.mktemp("depth_store"), episodes=3, t=8, size=32)


# ----------------------------------------------------------------------------------------
# The module
# ----------------------------------------------------------------------------------------


def test_predict_gives_finite_positive_metres_in_batches():
    head = seeded(DepthHead, 0).train()
    assert 50_000 < sum(p.numel() for p in head.parameters()) < 300_000
    rgb = frames(5)
    depth = head.predict(rgb, batch=2)  # 3 passes: 2 + 2 + 1 frames
    assert depth.shape == (5, 32, 32) and depth.dtype == np.float32
    assert np.isfinite(depth).all()
    assert depth.min() >= MIN_DEPTH_M and depth.max() <= 20.0
    np.testing.assert_allclose(head.predict(rgb), depth, rtol=1e-5)  # one pass: the same
    assert head.training  # predict ran in eval mode and put the mode back
    assert head.predict(rgb[:0]).shape == (0, 32, 32)


def test_predict_clamps_to_the_range_the_point_cache_needs():
    head = DepthHead(max_depth_m=12.0)
    with torch.no_grad():
        head.out.weight.zero_()
        head.out.bias.fill_(10.0)  # e^10 m: far beyond max_depth_m
    assert np.all(head.predict(frames(2)) == np.float32(12.0))
    with torch.no_grad():
        head.out.bias.fill_(-10.0)  # e^-10 m: nearer than the camera can be
    assert np.all(head.predict(frames(2)) == np.float32(MIN_DEPTH_M))


@pytest.mark.parametrize("bad", [frames(2).astype(np.float32), frames(2)[0],
                                 np.zeros((2, 32, 32, 4), np.uint8)])
def test_predict_rejects_what_is_not_uint8_frames(bad):
    with pytest.raises(ValueError, match=r"uint8 frames \(n, h, w, 3\)"):
        DepthHead().predict(bad)


def test_bad_sizes_and_configs_are_named():
    with pytest.raises(ValueError, match="multiples of 8, got \\(1, 3, 36, 32\\)"):
        DepthHead()(torch.zeros(1, 3, 36, 32))
    with pytest.raises(ValueError, match="norm_groups .* got 3"):
        DepthHead(norm_groups=3)
    with pytest.raises(ValueError, match="max_depth_m must be finite .* got inf"):
        DepthHead(max_depth_m=math.inf)
    with pytest.raises(ValueError, match="at least 2 levels"):
        DepthHead(block_out_channels=(16,))


def test_learns_two_flat_colours_at_two_depths():
    rgb, depth = two_depths()
    batch = {"frames": frames_to_tensor(rgb), "log_depth": log_depth_target(depth, 20.0)}
    head = seeded(DepthHead, 0)
    opt = torch.optim.Adam(head.parameters(), lr=3e-3)
    losses = []
    for _ in range(150):
        loss, _ = depth_loss(head, batch, None)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[0] > 0.5  # starts at e^1.5 = 4.5 m, between 2 and 8 m
    assert losses[-1] < 0.1 * losses[0]
    scores = depth_scores(head.predict(rgb), depth, 20.0)
    assert scores["abs_rel"] < 0.08 and scores["delta1"] > 0.95, scores


def test_save_and_load_give_identical_predictions(tmp_path):
    head = seeded(lambda: DepthHead(block_out_channels=(8, 16, 32), max_depth_m=12.0), 3)
    save_model_dir(head, tmp_path / "model")
    assert (tmp_path / "model" / "diffusion_pytorch_model.safetensors").is_file()
    loaded = load_depth_head(tmp_path / "model")
    assert tuple(loaded.config.block_out_channels) == (8, 16, 32)
    assert loaded.config.max_depth_m == 12.0 and not loaded.training
    rgb = frames(3)
    assert np.array_equal(loaded.predict(rgb), head.predict(rgb))


def test_load_refuses_weights_of_another_shape(tmp_path):
    save_model_dir(DepthHead(block_out_channels=(8, 16, 32)), tmp_path / "model")
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    config["block_out_channels"] = [16, 32, 64]
    (tmp_path / "model" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="has shape"):
        load_depth_head(tmp_path / "model")


# ----------------------------------------------------------------------------------------
# Scores and data
# ----------------------------------------------------------------------------------------


def test_scores_on_known_numbers():
    true = np.full((2, 4, 4), 4.0, np.float32)
    true[:, 0] = np.inf  # a sky row: no true distance
    true[:, 1] = 30.0  # beyond max_depth_m: clamped in training, not scored
    pred = np.full_like(true, 4.4)  # 10% too far on the 16 scored pixels
    pred[0, 2:] = 5.2  # 30% too far on half of them (frame 0's rows 2 and 3)
    s = depth_scores(pred, true, 20.0)
    assert s["pixels"] == 16 and s["frames"] == 2
    assert s["abs_rel"] == pytest.approx((8 * 0.1 + 8 * 0.3) / 16, rel=1e-5)
    assert s["delta1"] == pytest.approx(0.5)
    want_l1 = np.mean(np.abs(np.log(pred) - np.log(np.clip(true, MIN_DEPTH_M, 20.0))))
    assert s["l1_log"] == pytest.approx(float(want_l1), rel=1e-6)
    with pytest.raises(ValueError, match="differ in shape"):
        depth_scores(pred[:1], true, 20.0)


def test_the_target_clamps_inf_and_far_depth_to_max_depth():
    t = log_depth_target(np.array([[[np.inf, 30.0], [2.0, 0.01]]], np.float32), 20.0)
    assert t.shape == (1, 1, 2, 2)
    np.testing.assert_allclose(t.exp().numpy()[0, 0], [[20.0, 20.0], [2.0, MIN_DEPTH_M]],
                               rtol=1e-6)


def test_pick_episodes_caps_the_frames_in_memory(store):
    ids = store.ids()  # 3 episodes of 8 frames
    assert pick_episodes(store, ids, 100, seed=0) == ids
    some = pick_episodes(store, ids, 16, seed=0)
    assert len(some) == 2 and some == sorted(some, key=ids.index)
    assert len(pick_episodes(store, ids, 3, seed=0)) == 1  # at least one
    with pytest.raises(ValueError, match="max_frames must be >= 1, got 0"):
        pick_episodes(store, ids, 0, seed=0)


# ----------------------------------------------------------------------------------------
# The recipe and the command
# ----------------------------------------------------------------------------------------


def test_recipe_trains_scores_and_saves(store, tmp_path):
    seen, plan = [], {}
    run = train_depth_head(store, tmp_path / "run", steps=3, batch_size=4,
                           callbacks=[seen.append], on_start=plan.update)
    assert [s["step"] for s in seen] == [1, 2, 3] and all(np.isfinite(s["loss"]) for s in seen)
    assert plan["frames"] == 16 and plan["episodes"] == 2 and plan["steps"] == 3
    assert run.held_ids == store.ids()[-1:] and len(run.train_ids) == 2
    s = run.scores
    assert s["frames"] == 8 and s["pixels"] == 8 * 24 * 32  # the inf quarter is not scored
    assert 0 < s["abs_rel"] < 10 and 0 <= s["delta1"] <= 1 and s["l1_log"] > 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["abs_rel"] == pytest.approx(s["abs_rel"]) and metrics["steps"] == 3
    assert metrics["train_frames"] == 16 and metrics["max_depth_m"] == 20.0
    loaded = load_depth_head(tmp_path / "run" / "model")
    rgb = store.read(run.held_ids[0]).rgb
    assert np.array_equal(loaded.predict(rgb), run.model.predict(rgb))


def test_train_depth_head_command(store, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["train", "depth-head", "--data", str(store.root), "--out", str(out),
                 "--steps", "2", "--batch-size", "4", "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    assert f"abs_rel {metrics['abs_rel']:.4f}, delta1 {metrics['delta1']:.4f}" in printed
    assert "held-out (8 frames of 1 episodes)" in printed
    assert (out / "model" / "config.json").is_file() and metrics["steps"] == 2
