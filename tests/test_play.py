"""Live play: the step stream, prompts at chunk boundaries, the bounded cache, save/load
identity, bad input, the widget shell and the scripted CLI. A tiny randomised world
(tiny preset, 32x32 frames) and the procedural engine at 32x32 as the twin; seeded."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import worldlab as wl
from worldlab.camera import Action
from worldlab.model.autoencoder import VideoAutoencoder
from worldlab.model.dit import WorldModel
from worldlab.play import WorldSession

WALK = [Action(forward=0.2, yaw=4.0), Action(right=0.1), Action(yaw=-6.0, pitch=2.0),
        Action(forward=0.25, buttons={"jump"})]


def make_tiny_world(path, seed: int = 0):
    """An untrained tiny world on disk (the layout of worldlab.pretrained). The layers that
    start at zero are randomised so that actions, poses and text all change the output."""
    cfg = wl.make_config("tiny", data__engine="procedural")
    torch.manual_seed(seed)
    ae = VideoAutoencoder.from_config_dataclass(cfg.autoencoder)
    model = WorldModel.from_config_dataclass(cfg.model, cfg.autoencoder.latent_channels,
                                             cfg.data.size // ae.downsample)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim and bool((p == 0).all()):
                p.normal_(0.0, 0.05)
    ae.save_pretrained(path / "autoencoder")
    model.save_pretrained(path / "world")
    (path / "world_config.json").write_text(cfg.to_json())
    return path


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def session(world, policy="hold", twin=True, seed=0) -> WorldSession:
    s = WorldSession(world, twin=twin, policy=policy)
    s.reset(engine="procedural", seed=seed)
    return s


def assert_same_state(a, b):
    (ta, ma), (tb, mb) = a, b
    assert ma == mb
    assert sorted(ta) == sorted(tb)
    for k in ta:
        assert torch.equal(ta[k], tb[k]), k


# ----------------------------------------------------------------------------------------
# The step stream
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["hold", "buffer"])
def test_step_stream_shapes_and_chunks(world, policy):
    s = session(world, policy)
    f, size = world.chunk_frames, world.size
    results = [s.step(WALK[i % 4]) for i in range(2 * f + 1)]
    for i, r in enumerate(results, start=1):
        assert r.frame.shape == (size, size, 3) and r.frame.dtype == np.uint8
        assert r.twin_frame.shape == (size, size, 3) and r.c2w.shape == (4, 4)
        assert r.step == i
        # PSNR scores generated frames only ("buffer" shows the context frame at first)
        assert (r.stats["psnr"] is None) == (policy == "buffer" and i < f)
    applied = [r.stats["applied"] for r in results]
    if policy == "hold":  # a chunk is made on its first step: steps 1, f + 1, 2 f + 1
        assert applied == [i % f == 0 for i in range(2 * f + 1)]
        assert [r.stats["key_to_pixel_ms"] is not None for r in results] == applied
    else:  # made when the f-th action arrives; earlier steps repeat the context frame
        made = [r.stats["key_to_pixel_ms"] is not None for r in results]
        assert made == [i % f == f - 1 for i in range(2 * f + 1)]
        assert all(np.array_equal(r.frame, results[0].frame) for r in results[:f - 1])
    made = sum(r.stats["key_to_pixel_ms"] is not None for r in results)
    assert s.state.stream.cache.chunks == 1 + made


def test_hold_policy_holds_the_chunks_first_action(world):
    """Without the twin, poses integrate the held action; mid-chunk actions do nothing."""
    f = world.chunk_frames
    a, b = session(world, twin=False), session(world, twin=False)
    ra = [a.step(Action(forward=0.2)) for _ in range(f)]
    rb = [b.step(Action(forward=0.2))] + [b.step(Action(yaw=30.0)) for _ in range(f - 1)]
    for x, y in zip(ra, rb):
        assert np.array_equal(x.frame, y.frame) and np.allclose(x.c2w, y.c2w)
    steps = np.array([r.c2w[:3, 3] for r in ra])
    assert np.allclose(np.linalg.norm(np.diff(steps, axis=0), axis=1), 0.2)


def test_twin_poses_condition_the_model(world):
    """With the twin, each frame's pose is the engine's pose after the same actions."""
    from worldlab.engines import make_engine

    f = world.chunk_frames
    s = session(world)
    results = [s.step(WALK[i % 4]) for i in range(2 * f)]
    engine = make_engine("procedural", size=world.size)
    engine.reset(seed=0)
    for _ in range(f - 1):  # the context chunk: reset + f - 1 no-op steps
        engine.step(Action())
    for i, r in enumerate(results):  # "hold": each chunk plays its first action f times
        obs = engine.step(WALK[(i - i % f) % 4])
        assert np.array_equal(r.c2w, obs.c2w) and np.array_equal(r.twin_frame, obs.rgb)
    engine.close()


def test_prompt_takes_effect_at_the_next_chunk_boundary_only(world):
    f = world.chunk_frames
    plain, prompted = session(world), session(world)
    rp = [plain.step(WALK[i % 4]) for i in range(2 * f)]
    rq = [prompted.step(WALK[i % 4], "summon a monster" if i == 1 else None)
          for i in range(2 * f)]
    for x, y in zip(rp[:f], rq[:f]):  # the chunk already made is never touched
        assert np.array_equal(x.frame, y.frame)
    assert rq[1].stats["pending_prompt"] == "summon a monster"
    assert rq[f - 1].stats["event"] == "" and rq[f].stats["event"] == "summon a monster"
    assert not np.array_equal(rp[f].frame, rq[f].frame)  # the next chunk sees the caption


def test_cache_is_bounded_and_memory_flat(world):
    s = session(world, twin=False)
    window = world.model.config.window_chunks
    for i in range(world.chunk_frames * (window + 3)):
        r = s.step(WALK[i % 4])
    assert r.stats["cache_chunks"] == window and s.state.stream.cache.chunks == window + 4
    keys = s.state.stream.cache.keys[0].shape[2]
    assert keys == window * world.chunk_frames * world.model.grid ** 2
    # no twin: no replay log
    assert len(s.state.queue) < world.chunk_frames and len(s.state.log) == 0
    # no autograd history hangs off the cache (it would chain every chunk ever appended)
    cache = s.state.stream.cache
    assert not any(k.requires_grad or k.grad_fn for k in cache.keys + cache.values)


# ----------------------------------------------------------------------------------------
# Save / load
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["hold", "buffer"])
def test_save_load_resumes_identically(world, tmp_path, policy):
    f = world.chunk_frames
    script = [(WALK[i % 4], "open the door" if i == 3 else None) for i in range(3 * f + 2)]
    cut = f + 2  # mid-chunk: queued frames and (buffer) waiting actions are saved too
    ref = session(world, policy)
    expected = [ref.step(a, p) for a, p in script]

    first = session(world, policy)
    for a, p in script[:cut]:
        first.step(a, p)
    first.save(tmp_path / "saved")
    first.step(Action(yaw=45.0))  # diverge after saving: must not affect the copy on disk
    resumed = WorldSession(world, twin=True, policy=policy)
    resumed.reset(engine="procedural", seed=7)  # a different session, overwritten by load
    resumed.load(tmp_path / "saved")
    for (a, p), want in zip(script[cut:], expected[cut:]):
        got = resumed.step(a, p)
        assert got.step == want.step
        assert np.array_equal(got.frame, want.frame)
        assert np.array_equal(got.twin_frame, want.twin_frame)
        assert np.allclose(got.c2w, want.c2w, atol=0)


def test_load_rejects_a_directory_that_is_not_a_session(world, tmp_path):
    s = session(world, twin=False)
    before = s.snapshot()
    with pytest.raises(ValueError, match="not a saved session"):
        s.load(tmp_path)
    assert_same_state(before, s.snapshot())


# ----------------------------------------------------------------------------------------
# Bad input changes nothing
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("action, prompt, match", [
    ({"buttons": ["fly"]}, None, "unknown button 'fly'"),
    ({"forward": float("nan")}, None, "forward must be finite"),
    ({"yaw": 1e6}, None, "yaw"),
    ({"speed": 1.0}, None, "unknown action field 'speed'"),
    ("w", None, "must be a worldlab.camera.Action"),
    (Action(), "", "prompt is empty"),
    (Action(), "x" * 201, "201 characters"),
    (Action(), 42, "prompt must be a str"),
])
@pytest.mark.parametrize("mid_chunk", [False, True])
def test_bad_input_raises_and_leaves_state_unchanged(world, action, prompt, match, mid_chunk):
    s = session(world)
    for i in range(2 if mid_chunk else world.chunk_frames):
        s.step(WALK[i])
    before = s.snapshot()
    with pytest.raises(ValueError, match=match):
        s.step(action, prompt)
    assert_same_state(before, s.snapshot())


def test_pitch_past_the_horizon_limit_raises_before_any_change(world):
    s = session(world, twin=False)  # without the twin the session integrates the pose
    before = s.snapshot()
    with pytest.raises(ValueError, match="pitch must be in"):
        s.step(Action(pitch=30.0))  # held for 4 frames: 120 degrees
    assert_same_state(before, s.snapshot())
    assert s.step(Action(pitch=10.0)).step == 1  # still usable


def test_reset_from_user_frames(world):
    f, size = world.chunk_frames, world.size
    frames = np.random.default_rng(0).integers(0, 256, (2 * f, size, size, 3), dtype=np.uint8)
    s = WorldSession(world, twin=True)
    first = s.reset(frames=frames)
    assert np.array_equal(first.frame, frames[-1]) and first.twin_frame is None
    assert s.state.stream.cache.chunks == 2 and s.engine is None
    assert s.step(Action(forward=0.1)).frame.shape == (size, size, 3)
    with pytest.raises(ValueError, match="multiple of chunk_frames"):
        s.reset(frames=frames[:f + 1])


# ----------------------------------------------------------------------------------------
# Front ends: widget shell and scripted CLI
# ----------------------------------------------------------------------------------------


def test_notebook_game_scripted_run_uses_the_keyboard_path(world):
    from worldlab.play import KEYMAP, NotebookGame

    a, b = session(world), session(world)
    game, f = NotebookGame(a), a.f
    keys = ["w", "ArrowLeft", "w", "d", "f", "ArrowUp", "w", "e"]
    by_key = [game.press(k) for k in keys]  # "hold": a press plays its chunk out
    by_script = NotebookGame(b).run_script([KEYMAP[k] for k in keys for _ in range(f)])
    for i, x in enumerate(by_key):
        assert np.array_equal(x.frame, by_script[(i + 1) * f - 1].frame)
    png = game.image.value
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and "PSNR" in game.stats.value
    assert game.press("q") is None  # unmapped keys are ignored
    game._guard(game.apply, {"buttons": ["fly"]})  # callback errors land in the panel
    assert "unknown button 'fly'" in game.errors.outputs[-1]["text"]
    assert a.state.step_index == len(keys) * f


@pytest.mark.parametrize("policy", ["hold", "buffer"])
def test_step_chunk_is_one_key_press(world, policy):
    """"hold": a press plays the chunk it opens (f steps, each frame shown once), the same
    as f steps with that action; "buffer": one step. The session's public view of the
    screen (`current`) is the last result."""
    s, ref = session(world, policy), session(world, policy)
    results = s.step_chunk(Action(forward=0.2), "summon a monster")
    expected = [ref.step(Action(forward=0.2), "summon a monster")] + \
        [ref.step(Action(forward=0.2)) for _ in range(len(results) - 1)]
    assert len(results) == (world.chunk_frames if policy == "hold" else 1)
    for x, y in zip(results, expected):
        assert np.array_equal(x.frame, y.frame) and x.step == y.step
    now = s.current()
    assert now.step == results[-1].step and np.array_equal(now.frame, results[-1].frame)
    assert not s.state.queue or policy == "buffer"
    with pytest.raises(RuntimeError, match="reset"):
        WorldSession(world).current()


def test_script_validation_names_index_and_field(tmp_path):
    from worldlab.play.script import load_script

    path = tmp_path / "a.json"
    path.write_text(json.dumps([{"forward": 0.2}, {"yaw": "left"}]))
    with pytest.raises(ValueError, match=r"\[1\]: Action.yaw must be a number"):
        load_script(path)
    path.write_text(json.dumps([{"forward": 0.2, "prompt": ""}]))
    with pytest.raises(ValueError, match=r"\[0\]: prompt is empty"):
        load_script(path)
    path.write_text(json.dumps({"forward": 0.2}))
    with pytest.raises(ValueError, match="non-empty JSON list"):
        load_script(path)


def test_the_example_action_file_parses():
    """examples/walk.json, the README's example of the `play --script` format."""
    from worldlab.play.script import load_script

    steps = load_script(wl.paths.ROOT / "examples" / "walk.json")
    assert len(steps) == 24 and sum(p is not None for _, p in steps) == 1
    assert steps[8][0] == Action(yaw=10.0) and steps[-1][0] == Action()


def test_play_cli_writes_videos_and_scores(world_dir, tmp_path):
    import imageio.v3 as iio

    from worldlab.cli import main
    from worldlab.play.script import demo_script

    script = tmp_path / "actions.json"
    script.write_text(json.dumps(demo_script(6)))
    out = tmp_path / "play"
    assert main(["play", "--checkpoint", str(world_dir), "--script", str(script),
                 "--out", str(out), "--engine", "procedural", "--device", "cpu"]) == 0
    scores = json.loads((out / "scores.json").read_text())
    assert len(scores["psnr"]) == 6 and all(np.isfinite(scores["psnr"]))
    for baseline in ("baseline_repeat_psnr", "baseline_warp_psnr"):  # beside the model's
        assert len(scores[baseline]) == 6 and all(np.isfinite(scores[baseline]))
    gen = iio.imread(out / "generated.mp4", plugin="FFMPEG")
    both = iio.imread(out / "side_by_side.mp4", plugin="FFMPEG")
    assert gen.shape == (7, 256, 256, 3)  # the context frame + 6 steps, 32 px enlarged 8x
    # model | 2 px gap | twin = 66 px, enlarged 8x, under a 16 px bar that names them
    assert both.shape == (7, 16 + 256, 528, 3)
    bar = both[0, 2:14].max(axis=(0, 2))  # (528,) brightest pixel per column of the bar
    assert bar[:64].max() > 200 and bar[264:].max() > 200  # "model" and "engine twin"
    assert bar[80:256].max() < 60  # dark between the two names


def test_play_paints_by_default_only_a_world_with_a_depth_head(world_dir):
    from worldlab.play.script import can_paint

    assert not can_paint(world_dir)  # the network alone: no depth head to lift frames
    for name in ("doom64", "proc64"):  # both defaults ship one
        assert can_paint(wl.paths.ROOT / "data" / "checkpoints" / name)


def test_minimap_holds_the_trail_and_heading_after_a_script(world):
    from worldlab.play.widgets import HERE_TRACE, TRAIL_TRACE, NotebookGame

    s = session(world)
    start = s.state.pose[:2, 3].copy()
    game = NotebookGame(s)
    walk = WALK + [Action(yaw=45.0), Action(forward=0.2, yaw=-30.0)]  # not a whole chunk
    results = game.run_script(walk)
    trail, here = game.map.data[TRAIL_TRACE], game.map.data[HERE_TRACE]
    expected = np.stack([start] + [r.c2w[:2, 3] for r in results])  # (t, 2) x east, y north
    assert np.array_equal(np.stack([trail.x, trail.y], axis=1), expected)
    assert (here.x[0], here.y[0]) == tuple(expected[-1])
    # plotly turns the arrow clockwise from north: it must point along the camera's forward
    angle = np.radians(here.marker.angle)
    forward = results[-1].c2w[:2, 2] / np.linalg.norm(results[-1].c2w[:2, 2])
    np.testing.assert_allclose([np.sin(angle), np.cos(angle)], forward, atol=1e-9)
    assert game.map.layout.yaxis.scaleanchor == "x"  # equal aspect: metres are square


def test_minimap_is_redrawn_once_per_chunk(world):
    from worldlab.play.widgets import TRAIL_TRACE, NotebookGame

    s = session(world)
    game = NotebookGame(s)
    trail = game.map.data[TRAIL_TRACE]
    lengths = []
    for _ in range(2 * s.f):
        game.apply(Action(forward=0.25))  # one step each
        lengths.append(len(trail.x))
    # the context pose until the chunk's last frame is shown, then every step so far
    assert lengths == [1] * (s.f - 1) + [s.f + 1] * s.f + [2 * s.f + 1]
    game.press("w")  # a press plays a whole chunk out, so the map redraws after it
    assert len(trail.x) == 3 * s.f + 1


def test_minimap_cache_points_hook(world):
    from worldlab.play.widgets import CACHE_TRACE, NotebookGame

    game = NotebookGame(session(world))
    cache = game.map.data[CACHE_TRACE]
    assert len(cache.x) == 0  # empty until a memory cache is shown
    pts = np.random.default_rng(0).normal(size=(50, 3))
    game.show_cache_points(pts)
    assert np.array_equal(cache.x, pts[:, 0]) and np.array_equal(cache.y, pts[:, 1])
    for bad in (pts[:, :2], np.full((2, 3), np.nan)):
        with pytest.raises(ValueError, match=r"cache points must be finite \(n, 3\)"):
            game.show_cache_points(bad)
        assert np.array_equal(cache.x, pts[:, 0])  # unchanged
    game.show_cache_points(np.zeros((0, 3)))
    assert len(cache.x) == 0


def test_minimap_draws_the_levels_walls_in_metres(world):
    from worldlab.engines.coverage import area_from_grid
    from worldlab.play.widgets import WALL_TRACE, NotebookGame, map_figure

    s = session(world)
    area = s.engine.reachable_area()
    walls = NotebookGame(s).map.data[WALL_TRACE]
    xy = np.stack([walls.x, walls.y], 1)  # segments, each followed by a None gap
    assert len(xy) == 3 * len(area.walls) > 0
    np.testing.assert_array_equal(xy[0::3].astype(float), area.walls[:, 0])
    assert all(v is None for v in walls.x[2::3])
    # the player stands on the drawn floor, inside the walls
    assert area.contains(s.state.pose[None, :2, 3])[0]
    fig = map_figure(area_from_grid(np.ones((2, 2), bool), 0.0, 1.0))
    assert len(fig.data[WALL_TRACE].x) == 3 * 8  # a 2 x 2 m square: 8 one-metre walls
    assert fig.layout.xaxis.ticksuffix == " m" and fig.layout.yaxis.ticksuffix == " m"
    assert len(map_figure().data[WALL_TRACE].x) == 0  # no engine: no walls
