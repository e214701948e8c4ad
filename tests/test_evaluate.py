"""The evaluation protocols on a tiny synthetic world where the right answer is known.

Frames are flat grey, one grey level brighter every step (`STEP` levels), so repeating the
last frame j steps late is off by exactly j * STEP levels: its PSNR is 20 log10(255 / (j
STEP)) whatever the start. An oracle model that knows every episode's true latents and
returns the velocity landing on them generates exactly the autoencoder's reconstruction of
the truth, so it scores the autoencoder ceiling; a variant that lands on the last context
latent scores what repeating that frame scores. The autoencoder is the tiny preset's,
untrained: the ceiling is low, and known."""

from __future__ import annotations


import numpy as np
import pytest
import torch

import worldlab as wl
from worldlab import camera
from worldlab.episodes import Episode
from worldlab.evaluate import drift, mirror_controls, next_chunk, quick_suite, runtime
from worldlab.metrics import frame_psnr
from worldlab.model.autoencoder import frames_to_tensor, tensor_to_frames
from worldlab.model.dit import WorldModel
from worldlab.pretrained import World

from oracle_worlds import OracleModel, straight_walk, tiny_autoencoder

SIZE, FRAMES, STEP, HORIZON = 32, 24, 3, 8


def grey_episode(seed: int) -> Episode:
    """Flat frames 60 + seed + k STEP at step k, walking straight ahead."""
    rgb = np.stack([np.full((SIZE, SIZE, 3), 60 + seed + k * STEP, np.uint8)
                    for k in range(FRAMES)])
    return straight_walk(rgb, seed, 0.2)


@pytest.fixture(scope="module")
def setup():
    episodes = [grey_episode(s) for s in range(2)]
    cfg, ae, latents = tiny_autoencoder(episodes, SIZE)
    return cfg, ae, episodes, latents


def oracle_world(setup, mode: str) -> World:
    cfg, ae, _, latents = setup
    return World(ae, OracleModel(latents, cfg.model.chunk_frames, mode), cfg,
                 torch.device("cpu"))


def repeat_db(j) -> np.ndarray:
    """PSNR (dB) of a flat frame j steps late: off by j * STEP grey levels."""
    return 20 * np.log10(255.0 / (np.asarray(j) * STEP))


def test_oracle_scores_the_autoencoder_ceiling(setup):
    world = oracle_world(setup, "truth")
    f = world.chunk_frames
    r = next_chunk(world, setup[2], starts_per_episode=3)
    ctx = world.config.model.window_chunks * f  # the context the world was trained with
    assert r["next_chunk_context_frames"] == ctx
    assert r["next_chunk_samples"] == 2 * min(3, (FRAMES - ctx - f) // f + 1)
    assert r["next_chunk_short_episodes"] == 0
    assert r["next_chunk_psnr"] == pytest.approx(r["autoencoder_psnr"], abs=0.05)
    assert r["baseline_repeat_psnr"] == pytest.approx(repeat_db(np.arange(1, f + 1)).mean())
    # a flat frame warped anywhere is the same flat frame: both warps are repeat-last
    assert r["baseline_warp_psnr"] == pytest.approx(r["baseline_repeat_psnr"])
    assert r["baseline_view_warp_psnr"] == pytest.approx(r["baseline_repeat_psnr"])


def test_next_chunk_context_is_a_choice_and_short_walks_are_counted(setup):
    world = oracle_world(setup, "truth")
    f = world.chunk_frames
    one = next_chunk(world, setup[2], starts_per_episode=3, context_chunks=1)
    assert one["next_chunk_context_frames"] == f and one["next_chunk_samples"] == 6
    assert len(one["baseline_warp_psnr_per_episode"]) == 2
    # a walk with room for less context gets what it has room for; one without any is out
    short = [setup[2][0], straight_walk(setup[2][1].rgb[:2 * f], 1, 0.2),
             straight_walk(setup[2][1].rgb[:f], 1, 0.2)]
    r = next_chunk(world, short, starts_per_episode=3, context_chunks=2)
    assert r["next_chunk_context_capped"] == 1 and r["next_chunk_short_episodes"] == 1
    assert len(r["next_chunk_psnr_per_episode"]) == 2
    with pytest.raises(ValueError, match="no episode has room for a chunk of context"):
        next_chunk(world, short[2:], context_chunks=1)
    with pytest.raises(ValueError, match="context_chunks must be a positive number"):
        next_chunk(world, setup[2], context_chunks=0)


def test_drift_curve_of_the_oracle_and_of_repeat_last(setup):
    world = oracle_world(setup, "truth")
    f = world.chunk_frames
    r = drift(world, setup[2], horizon=HORIZON)
    np.testing.assert_allclose(r["baseline_repeat_rollout_psnr"],
                               repeat_db(np.arange(1, HORIZON + 1)), atol=1e-3)
    ceiling = np.mean([frame_psnr(world.decode(world.encode(ep.rgb[f:f + HORIZON])),
                                  ep.rgb[f:f + HORIZON]) for ep in setup[2]], axis=0)
    np.testing.assert_allclose(r["rollout_psnr"], ceiling, atol=0.05)
    # the oracle ignores its controls, so mirroring them costs nothing
    assert r["mirrored_actions_rollout_psnr"] == pytest.approx(r["rollout_psnr_mean"], abs=0.05)


def test_a_model_that_repeats_the_last_frame_scores_repeat_last(setup):
    """Through the autoencoder: repeating the last context latent is repeating that
    frame's reconstruction."""
    world = oracle_world(setup, "repeat")
    r = drift(world, setup[2], horizon=HORIZON)
    last = [world.decode(world.encode(ep.rgb[world.chunk_frames - 1:world.chunk_frames]))
            for ep in setup[2]]
    f = world.chunk_frames
    expected = np.mean([frame_psnr(np.repeat(x, HORIZON, 0), ep.rgb[f:f + HORIZON])
                        for x, ep in zip(last, setup[2])], axis=0)
    np.testing.assert_allclose(r["rollout_psnr"], expected, atol=0.05)


def test_mirrored_controls_are_a_valid_path():
    traj = camera.leave_and_return([camera.Action(forward=0.2, yaw=12.0, right=0.05)] * 6)
    actions = np.concatenate([np.zeros((1, camera.ACTION_WIDTH), np.float32),
                              camera.actions_to_array(traj.actions)])
    a, c2w = mirror_controls(actions, traj.c2w)
    for pose in c2w:  # proper rigid motions
        camera.check_c2w(pose)
        assert np.linalg.det(pose[:3, :3]) == pytest.approx(1.0)
    np.testing.assert_allclose(c2w[0], traj.c2w[0], atol=1e-12)  # starts where it started
    mirrored = camera.actions_to_array(camera.actions_from_poses(c2w))
    original = camera.actions_to_array(camera.actions_from_poses(traj.c2w))
    yaw, right = camera.ACTION_FIELDS.index("yaw"), camera.ACTION_FIELDS.index("right")
    np.testing.assert_allclose(mirrored[:, yaw], -original[:, yaw], atol=1e-9)
    np.testing.assert_allclose(mirrored[:, right], -original[:, right], atol=1e-9)
    np.testing.assert_allclose(a[1:, yaw], -actions[1:, yaw])
    # the commanded actions and the mirrored poses still agree with each other
    np.testing.assert_allclose(mirrored[:, yaw], a[1:, yaw], atol=1e-4)


def test_quick_suite_and_runtime_on_a_tiny_world(setup):
    cfg, ae, episodes, latents = setup
    torch.manual_seed(1)
    model = WorldModel.from_config_dataclass(cfg.model, latents[0].shape[1],
                                             latents[0].shape[-1]).eval()
    world = World(ae, model, cfg, torch.device("cpu"))
    done = []
    r = quick_suite(world, episodes, horizon=HORIZON, starts_per_episode=2, runtime_chunks=4,
                    progress=done.append)
    assert done == ["next_chunk", "drift", "realism", "runtime"]
    # drift shares its rollouts with realism, its numbers are drift's own
    assert r["rollout_psnr"] == drift(world, episodes, HORIZON)["rollout_psnr"]
    # the shipped probes read 64 px frames, this world makes 32 px ones: no score, and why
    assert r["realism_distance"] is r["realism_distance_ae"] is None
    assert "32 px" in r["realism_note"] and "64 px" in r["realism_note"]
    assert len(r["rollout_psnr"]) == len(r["baseline_repeat_rollout_psnr"]) == HORIZON
    assert r["bars"]["next_chunk_minus_repeat_db"] == pytest.approx(
        r["next_chunk_psnr"] - r["baseline_repeat_psnr"])
    assert isinstance(r["bars"]["rollout_beats_repeat_every_step"], bool)
    rt = runtime(world, chunks=4)
    assert len(rt["latency_ms_per_chunk"]) == 4 and rt["fps"] > 0
    assert rt["fps"] == pytest.approx(1000 * world.chunk_frames / rt["chunk_latency_ms"])


def test_autoencoder_suite_from_random_starts(tmp_path):
    """`eval --suite autoencoder`: reconstruction scores on held-out episodes whose starts
    are drawn over the whole level; the JSON says where the episodes came from."""
    import json

    from worldlab.cli import main

    from test_play import make_tiny_world

    world_dir = make_tiny_world(tmp_path / "world")
    out = tmp_path / "eval"
    assert main(["eval", "--suite", "autoencoder", "--checkpoint", str(world_dir),
                 "--engine", "procedural", "--episodes", "2", "--frames", "8", "--start",
                 "random", "--device", "cpu", "--threads", "1", "--out", str(out)]) == 0
    r = json.loads((out / "autoencoder.json").read_text())
    assert r["frames"] == 16 and r["episodes"]["start"] == "random"
    assert np.isfinite(r["psnr"]) and -1 <= r["ssim"] <= 1
    assert r["sharpness_ratio"] > 0 and 0 <= r["colour_distance"] <= 1
    eps = wl.evaluate.heldout_episodes("procedural", 2, 4, SIZE, start="random")
    assert eps[0].meta["start"] == "random" and not np.array_equal(eps[0].c2w[0], eps[1].c2w[0])

    # the same scores for the world's autoencoder scored alone (`--autoencoder DIR`)
    alone = tmp_path / "alone"
    assert main(["eval", "--suite", "autoencoder", "--autoencoder",
                 str(world_dir / "autoencoder"), "--engine", "procedural", "--size", str(SIZE),
                 "--episodes", "2", "--frames", "8", "--start", "random", "--device", "cpu",
                 "--threads", "1", "--out", str(alone)]) == 0
    a = json.loads((alone / "autoencoder.json").read_text())
    assert {k: a[k] for k in ("psnr", "ssim", "frames")} == \
        {k: r[k] for k in ("psnr", "ssim", "frames")}
    with pytest.raises(SystemExit, match="--suite autoencoder"):
        main(["eval", "--suite", "quick", "--autoencoder", str(world_dir / "autoencoder")])


def test_rollout_strip_rows_are_the_engine_then_each_world(setup):
    from worldlab.evaluate.strip import rollout_frames, rollout_strip

    _, ae, episodes, _ = setup
    worlds = {"truth": oracle_world(setup, "truth"), "repeat": oracle_world(setup, "repeat")}
    at = (1, 8, 20)  # steps after the context chunk: frames 4, 11, 23 of the episode
    rows = rollout_frames(worlds, episodes[0], at)
    assert list(rows) == ["engine", "truth", "repeat"]
    assert np.array_equal(rows["engine"], episodes[0].rgb[[4, 11, 23]])
    recon = wl.pretrained.World(ae, None, None, torch.device("cpu")).decode(
        ae.encode(frames_to_tensor(episodes[0].rgb[[4, 11, 23]])[None]))
    assert np.abs(rows["truth"].astype(int) - recon).max() <= 1  # the autoencoder's ceiling
    assert len({frame.tobytes() for frame in rows["repeat"]}) == 1  # one frame, repeated
    strip = rollout_strip(worlds, episodes[0], at, pad=2)
    assert strip.shape == (3 * SIZE + 2 * 2, 3 * SIZE + 2 * 2, 3)
    with pytest.raises(ValueError, match="needs 28"):
        rollout_frames(worlds, episodes[0], (21,))
    with pytest.raises(ValueError, match="steps >= 1"):
        rollout_frames(worlds, episodes[0], (0, 8))


def test_reconstruction_strip_rows_are_the_frames_then_each_autoencoder(setup):
    from worldlab.evaluate.strip import reconstruction_strip
    from worldlab.model.autoencoder import Resampling, reconstruct

    _, ae, episodes, _ = setup
    rgb = episodes[0].rgb[[0, 5, 9]]
    flat = np.full_like(rgb, 77)
    strip = reconstruction_strip({"tiny": ae, "bicubic": Resampling(2)},
                                 np.concatenate([rgb, flat]), scale=2, pad=1)
    big = 2 * SIZE  # every pixel a 2x2 block
    assert strip.shape == (3 * big + 2, 6 * big + 5, 3)

    def cell(row, col):  # one frame of the strip, at its own resolution again
        return strip[row * (big + 1): row * (big + 1) + big:2,
                     col * (big + 1): col * (big + 1) + big:2]
    assert np.array_equal(cell(0, 1), rgb[1])  # row 0: the frames themselves
    alone = tensor_to_frames(reconstruct(ae, frames_to_tensor(rgb[2:3])))[0]
    assert np.abs(cell(1, 2).astype(int) - alone).max() <= 1  # row 1: the first autoencoder
    assert np.abs(cell(2, 4).astype(int) - 77).max() <= 1  # bicubic keeps a flat frame
    with pytest.raises(ValueError, match="scale must be an int >= 1, got 0"):
        reconstruction_strip({"tiny": ae}, rgb, scale=0)
    with pytest.raises(ValueError, match="rgb must be non-empty uint8"):
        reconstruction_strip({"tiny": ae}, rgb.astype(np.float32))


def test_eval_without_metric_depth_records_doom_walks_on_its_depth_buffer(tmp_path):
    """`--no-metric-depth` (a machine without open3d): DOOM's coarse depth buffer, said in
    the JSON with the walks' player (`--policy`); for another engine it is an error naming
    the engine."""
    import json

    from worldlab.cli import main

    from test_play import make_tiny_world

    world_dir = make_tiny_world(tmp_path / "world")
    out = tmp_path / "eval"
    assert main(["eval", "--suite", "autoencoder", "--checkpoint", str(world_dir),
                 "--engine", "doom", "--no-metric-depth", "--policy", "turn_around",
                 "--episodes", "1", "--frames", "4", "--device", "cpu", "--threads", "1",
                 "--out", str(out)]) == 0
    episodes = json.loads((out / "autoencoder.json").read_text())["episodes"]
    assert episodes["metric_depth"] is False and episodes["policy"] == "turn_around"
    with pytest.raises(SystemExit, match="doom option; the engine is 'procedural'"):
        main(["eval", "--suite", "autoencoder", "--checkpoint", str(world_dir), "--engine",
              "procedural", "--no-metric-depth", "--out", str(tmp_path / "no")])
    assert not (tmp_path / "no").exists()


def test_a_fresh_world_is_timed_without_loading_the_text_encoder():
    """bench model --preset: the shipped caption table holds the still camera's caption."""
    from worldlab.evaluate.bench import fresh_world
    from worldlab.evaluate.protocols import still_conditions

    world = fresh_world("tiny", 64, "cpu")
    assert still_conditions(world)["text"].shape[-1] == 384
    assert world.captions.encoder is None
