"""The revisit protocol on worlds whose right answer is known.

The synthetic walk turns in place inside a textured sphere (radius 3 m, sky above 30
degrees of elevation: no depth there), 15 degrees a step, so every 24 frames it stands in
exactly the same pose and sees exactly the same frame: a return of coverage 1 to the frame
24 (or 48) steps earlier. An oracle world that lands on the true latents generates the
autoencoder's reconstruction, so it scores the autoencoder reference to the last digit."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from worldlab import camera
from worldlab.episodes import Episode, PromptSegment, make_meta
from worldlab.evaluate.memory_rollout import cost_summary
from worldlab.evaluate.revisit import (PSNR_MAX, bootstrap_interval, coverage, covered_frames,
                                       masked_psnr, oracle_frames, reference_scores, return_pairs, revisit)
from worldlab.memory.cache3d import backward_warp
from worldlab.metrics import frame_psnr
from worldlab.pretrained import World

from oracle_worlds import OracleModel, tiny_autoencoder

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

SIZE, FRAMES, TURN, RADIUS = 32, 60, 15.0, 3.0
PERIOD = int(360 / TURN)  # frames per full turn


def sphere_turn(seed: int, frames: int = FRAMES) -> Episode:
    """Turning in place TURN degrees a step inside a textured sphere; the pose and the
    frame repeat exactly every PERIOD steps."""
    K = camera.intrinsics_from_fov(SIZE, SIZE, 90.0)
    rays = np.concatenate([camera.pixel_grid(SIZE, SIZE), np.ones((SIZE, SIZE, 1))], -1) \
        @ np.linalg.inv(K).T  # (h, w, 3) camera rays with z = 1
    poses = np.stack([camera.pose_from_heading(np.zeros(3), TURN * (k % PERIOD))
                      for k in range(PERIOD)])
    rgb, depth = [], []
    for c2w in poses:
        d = rays @ c2w[:3, :3].T  # (h, w, 3) world directions
        az = np.arctan2(d[..., 1], d[..., 0])
        el = np.arctan2(d[..., 2], np.hypot(d[..., 0], d[..., 1]))
        c = [128 + 100 * np.sin(3 * az + p + seed) * np.cos(4 * el) for p in (0.0, 2.0, 4.0)]
        rgb.append(np.stack(c, -1).round().astype(np.uint8))
        z = RADIUS / np.linalg.norm(rays, axis=-1)  # a sphere about the camera, z-depth
        depth.append(np.where(el > np.radians(30), np.inf, z))
    take = np.arange(frames) % PERIOD
    c2w = poses[take]
    actions = np.concatenate([np.zeros((1, camera.ACTION_WIDTH), np.float32),
                              camera.actions_to_array(camera.actions_from_poses(c2w))])
    return Episode(rgb=np.stack(rgb)[take], depth=np.stack(depth).astype(np.float32)[take],
                   c2w=c2w, K=np.repeat(K[None], frames, 0), actions=actions,
                   prompts=[PromptSegment(0, "a sphere", "a player", "")],
                   meta=make_meta("synthetic", 10.0, seed=seed,
                                  policy="turn_around")).validate()


@pytest.fixture(scope="module")
def oracle():
    episodes = [sphere_turn(s) for s in range(2)]
    cfg, ae, latents = tiny_autoencoder(episodes, SIZE)

    def world(mode="truth"):
        return World(ae, OracleModel(latents, cfg.model.chunk_frames, mode), cfg,
                     torch.device("cpu"))
    return world, episodes


def test_returns_to_the_same_pose_match_the_earliest_same_view():
    ep = sphere_turn(0)
    pairs = return_pairs(ep, min_gap=PERIOD)
    assert [j for j, _, _ in pairs] == list(range(PERIOD, FRAMES))
    for j, i, cov in pairs:  # the same pose 24 and 48 steps back: the earliest wins
        assert i == (j % PERIOD if j >= 2 * PERIOD else j - PERIOD) and cov == 1.0
    # one frame more of gap: the same pose is out of reach before frame 48, a view 15
    # degrees off (the nearest allowed) covers part of the frame
    late = return_pairs(ep, min_gap=PERIOD + 1, start=30)
    assert all(j - i >= PERIOD + 1 and j >= 30 for j, i, _ in late)
    by_j = {j: (i, cov) for j, i, cov in late}
    assert by_j[30][0] == 5 and 0.5 < by_j[30][1] < 0.95  # frame 5 = frame 29
    assert by_j[50] == (2, 1.0)
    assert return_pairs(ep, min_gap=PERIOD + 1, min_overlap=0.99, frames=48) == []


def test_coverage_is_backward_warps_valid_share():
    from worldlab.episodes import record_episode

    ep = record_episode("procedural", 3, 40, SIZE, "leave_and_return", start="random")
    for j in (30, 39):
        cov = coverage(ep, j, range(j))
        finite = np.isfinite(ep.depth[j]) & (ep.depth[j] > 0)
        for i in range(0, j, 3):
            _, mask = backward_warp(ep.rgb[i], ep.depth[j], ep.c2w[i], ep.c2w[j], ep.K[j],
                                    src_depth=ep.depth[i], src_K=ep.K[i])
            assert cov[i] == pytest.approx(mask.sum() / finite.sum(), abs=1e-12)
    assert len(coverage(ep, 30, [])) == 0


def test_covered_frames_are_the_return_frames_at_any_batch():
    from worldlab.episodes import record_episode

    ep = record_episode("procedural", 3, 120, SIZE, "asymmetric_return", start="random")
    frames = range(40, 120)
    want = [j for j, _, _ in return_pairs(ep, 25, 0.5, start=40)]
    assert want  # the walk comes back
    for batch in (1, 7, 64, 200):
        np.testing.assert_array_equal(covered_frames(ep, frames, 25, 0.5, batch=batch), want)
    synthetic = sphere_turn(0)  # every frame from PERIOD on sees its own pose again
    np.testing.assert_array_equal(covered_frames(synthetic, range(FRAMES), PERIOD),
                                  np.arange(PERIOD, FRAMES))
    with pytest.raises(ValueError, match="batch"):
        covered_frames(ep, frames, 25, 0.5, batch=0)
    with pytest.raises(ValueError, match="min_overlap"):
        covered_frames(ep, frames, 25, 1.5)


def test_masked_psnr_golden_values():
    true = np.zeros((3, 4, 4, 3), np.uint8)
    pred = true.copy()
    pred[0, :2] = 10  # off by 10 on the masked rows of frame 0 only
    pred[:, 3] = 200  # unmasked row: ignored
    mask = np.zeros((3, 4, 4), bool)
    mask[0, :2] = True
    mask[1] = True
    mask[1, 3] = False
    got = masked_psnr(pred, true, mask)
    assert got[0] == pytest.approx(10 * np.log10(255 ** 2 / 100), abs=1e-9)  # 28.1308 dB
    assert got[1] == np.inf and np.isnan(got[2])  # exact on its pixels; no pixels
    with pytest.raises(ValueError, match=r"mask \(t, h, w\), got .* and \(3, 3, 4\)"):
        masked_psnr(pred, true, mask[:, :3])


def test_the_oracle_on_an_exact_return_scores_the_autoencoder(oracle):
    world, episodes = oracle
    ep, f = episodes[0], world().chunk_frames
    pairs = return_pairs(ep, PERIOD, start=f)
    refs = reference_scores(world(), ep, pairs, f, FRAMES)
    # the same frame i* = j through the same AE, in batches of other frames (whose company
    # can move a convolution's last bits on some CPUs): equal to far below a reported digit
    for key, tol in (("return_psnr", 1e-3), ("return_ssim", 1e-5)):
        np.testing.assert_allclose(refs["oracle"][key], refs["autoencoder"][key], atol=tol)
        np.testing.assert_allclose(refs["copy"][key], refs["autoencoder"][key], atol=tol)
    # a return 15 degrees off: warping frame i* into pose j beats showing it unwarped
    near = return_pairs(ep, PERIOD + 1, start=PERIOD + 1, frames=2 * PERIOD)
    j, i = [p[0] for p in near], [p[1] for p in near]
    warped = frame_psnr(oracle_frames(ep, near), ep.rgb[j])
    assert np.all(warped > frame_psnr(ep.rgb[i], ep.rgb[j]) + 3)


def test_bootstrap_interval_contains_the_pooled_mean_and_is_seeded():
    rng = np.random.default_rng(0)
    counts = rng.integers(5, 20, 8)
    sums = counts * rng.normal(20, 2, 8)
    lo, hi = bootstrap_interval(sums, counts, seed=3)
    assert lo < sums.sum() / counts.sum() < hi and hi - lo < 4
    assert bootstrap_interval(sums, counts, seed=3) == [lo, hi]
    assert bootstrap_interval(sums, counts, seed=4) != [lo, hi]
    assert bootstrap_interval([30.0], [3]) == [10.0, 10.0]  # one episode: no spread
    with pytest.raises(ValueError, match="counts"):
        bootstrap_interval([1.0, 2.0], [1])


def test_the_truth_world_scores_the_autoencoder_and_every_key_is_json(oracle):
    world, episodes = oracle
    ticks = []
    r = revisit({"truth": world(), "truth_seed1": world()}, episodes, cost_chunks=12,
                progress=ticks.append, min_gap=PERIOD)
    f = world().chunk_frames
    assert sum(ticks) == 2 * (2 * (FRAMES // f - 1) + 12)
    v, ae = r["variants"]["truth"], r["references"]["autoencoder"]
    assert r["return_frames"] == v["return_frames"] == 2 * (FRAMES - PERIOD)
    for key in ("return_psnr", "return_ssim", "self_consistency_psnr", "all_frames_psnr"):
        assert v[key] == pytest.approx(ae[key], abs=0.02)
    assert v["return_psnr"] == pytest.approx(r["references"]["oracle"]["return_psnr"],
                                             abs=0.02)
    assert v["return_psnr_ci"][0] <= v["return_psnr"] <= v["return_psnr_ci"][1]
    # a return to a generated frame shows it again exactly (the cap): all but the 2 f of
    # 36 returns per walk whose outbound frame is the engine's own (the first chunk)
    exact = (FRAMES - PERIOD - 2 * f) / (FRAMES - PERIOD)
    assert PSNR_MAX * exact < v["self_consistency_psnr"] < PSNR_MAX
    # repeat-last, where the turn comes back to the context's last frame f - 1: the cap
    assert r["curves"]["return_psnr"]["repeat"][PERIOD + f - 1] == PSNR_MAX
    assert r["references"]["copy"]["self_consistency_psnr"] is None
    assert len(v["per_episode"]["return_psnr"]) == 2 and v["memory_tokens_per_frame"] == 0
    assert v["memory_chunks_read"] == 0 and v["cost_chunks"] == 12
    assert v["memory"] == {"sink": False, "retrieve": 0, "cache3d": "off", "cache_stride": 2,
                           "cache_points": 65536} and v["model_memory"]["memory_tokens"] == 0
    # the two worlds were timed side by side, against the first
    assert r["cost_baseline"] == "truth" and v["ms_vs_first"] == 1.0
    assert r["variants"]["truth_seed1"]["ms_vs_first"] > 0
    assert r["seeds"]["truth"]["seeds"] == 2 and r["seeds"]["truth"]["return_psnr"]["std"] == 0
    c = r["curves"]
    assert len(c["frame"]) == len(c["psnr"]["truth"]) == len(c["return_psnr"]["oracle"]) == FRAMES
    assert c["return_frames"][PERIOD] == 2 and c["psnr"]["truth"][0] is None
    assert r["episodes"]["policies"] == ["turn_around"] * 2 and r["episodes"]["excluded"] == 0
    json.dumps(r, allow_nan=False)  # every number is plain JSON


def test_bad_episodes_are_named(oracle):
    world, episodes = oracle
    ep = episodes[0]
    blind = Episode(rgb=ep.rgb, depth=None, c2w=ep.c2w, K=ep.K, actions=ep.actions,
                    prompts=ep.prompts, meta={**ep.meta, "seed": 7})
    with pytest.raises(ValueError, match=r"episode 1 \(seed 7.*no depth"):
        revisit({"w": world()}, [ep, blind], cost_chunks=0)
    with pytest.raises(ValueError, match="episode 0 .* 6 frames, fewer than 2 chunks"):
        revisit({"w": world()}, [sphere_turn(0, 6)], cost_chunks=0)
    with pytest.raises(ValueError, match="none of the 1 episodes has a return frame"):
        revisit({"w": world()}, [sphere_turn(0, PERIOD)], cost_chunks=0)
    with pytest.raises(ValueError, match="cost_chunks"):
        revisit({"w": world()}, [ep], cost_chunks=11)
    with pytest.raises(ValueError, match="none called"):  # a world named like a reference
        revisit({"copy": world()}, [ep], cost_chunks=0)
    with pytest.raises(ValueError, match="min_gap"):
        return_pairs(ep, min_gap=0)
    # an episode without a return is left out and counted
    r = revisit({"w": world()}, [sphere_turn(0, PERIOD), ep], cost_chunks=0, min_gap=PERIOD)
    assert r["episodes"]["excluded"] == 1 and r["episodes"]["count"] == 1
    assert r["episodes"]["excluded_seeds"] == [0] and r["episodes"]["frames"] == [FRAMES]
    assert r["variants"]["w"]["ms_per_chunk"] is None


def test_cli_scores_the_tiny_world_on_recorded_revisit_walks(world_dir, tmp_path):
    from worldlab.cli import main

    out = tmp_path / "eval"
    assert main(["eval", "--suite", "revisit", "--model", f"a={world_dir}", "--engine",
                 "procedural", "--episodes", "2", "--frames", "48", "--steps", "1",
                 "--cost-chunks", "12", "--min-gap", "16", "--device", "cpu", "--threads",
                 "1", "--out", str(out)]) == 0
    r = json.loads((out / "revisit.json").read_text())
    assert set(r) >= {"variants", "references", "episodes", "return_frames", "curves",
                      "min_gap", "min_overlap", "seeds", "engine", "checkpoint"}
    v = r["variants"]["a"]
    assert set(v) >= {"return_psnr", "return_ssim", "self_consistency_psnr",
                      "all_frames_psnr", "return_frames", "return_psnr_ci",
                      "all_frames_psnr_ci", "per_episode", "ms_per_chunk",
                      "cost_ratio_chunk100_chunk2", "memory_tokens_per_frame", "checkpoint",
                      "sampling_steps", "memory", "model_memory"}
    assert set(r["references"]) == {"oracle", "copy", "repeat", "autoencoder"}
    assert v["checkpoint"] == str(world_dir) and v["sampling_steps"] == 1 and r["min_gap"] == 16
    e = r["episodes"]
    assert e["policy"] == ["leave_and_return", "asymmetric_return"] and e["start"] == "random"
    assert e["recorded"] == 2 and e["count"] == 2 and e["excluded"] == 0
    assert e["policies"] == ["leave_and_return", "asymmetric_return"]  # k % 2
    assert r["return_frames"] == sum(e["return_frames"]) > 0
    assert np.isfinite(v["return_psnr"]) and v["ms_per_chunk"] > 0


def test_cost_summary_cancels_the_machines_speed_chunk_by_chunk():
    rng = np.random.default_rng(0)
    k = np.arange(100)
    speed = np.where(k < 50, 1.3, 1.0) * rng.uniform(0.9, 1.1, 100)  # a host's speed swings
    ms = {"none": 100.0 * speed, "flat": 150.0 * speed, "growing": (150.0 + k) * speed}
    c = cost_summary(ms, {name: [4.0] * 100 for name in ms})
    assert c["flat"]["growth_vs_first"] == pytest.approx(1.0)
    assert c["flat"]["ms_vs_first"] == pytest.approx(1.5)
    assert c["flat"]["cost_ratio_chunk100_chunk2"] < 0.85  # the raw ratio keeps the swing
    assert c["growing"]["growth_vs_first"] == pytest.approx(244.5 / 155.5)  # chunks 90-99, 1-10
    assert c["none"]["chunks"] == 100 and len(c["none"]["chunk_ms"]) == 100
    assert c["none"]["memory_tokens_per_frame"] == 4.0
    with pytest.raises(ValueError, match="short"):
        cost_summary({"none": ms["none"], "short": ms["flat"][:50]},
                     {"none": [0.0] * 100, "short": [0.0] * 50})
