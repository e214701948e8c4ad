"""The DOOM engine: determinism, pose conversion, metric depth, geometry, events, bad input.

Tiny frames (64 px, one at 120 px to compare with ViZDoom's own buffers), few steps. One
engine per configuration is shared by the tests of a module (starting ViZDoom takes ~0.2 s).
"""

import math

import numpy as np
import pytest

from worldlab.camera import Action, heading_from_pose
from worldlab.engines import make_engine
from worldlab.engines.base import Engine
from worldlab.engines.doom import DoomEngine, EpisodeFinished
from worldlab.engines.doom_level import UNITS_PER_M_XY, UNITS_PER_M_Z, _slab_triangles
from worldlab.memory.cache3d import reprojection_error, view_warp, warp_frame

WALK = [Action(yaw=-10.0)] * 3 + [Action(forward=0.25)] * 8 + [Action(yaw=8.0, pitch=4.0)] * 3 \
    + [Action(forward=0.3, right=0.1)] * 6 + [Action(pitch=-6.0, yaw=-5.0)] * 4


@pytest.fixture(scope="module")
def engine():
    e = DoomEngine(size=64, monsters=False)
    yield e
    e.close()


@pytest.fixture(scope="module")
def flat_walk():
    """Observations of WALK with DOOM's distance light off (colours are view-independent)."""
    e = DoomEngine(size=64, monsters=False, flat_light=True)
    obs = [e.reset(seed=0)] + [e.step(a) for a in WALK]
    e.close()
    return obs


def play(e, seed, actions, prompts=None):
    prompts = prompts or [None] * len(actions)
    return [e.reset(seed=seed)] + [e.step(a, p) for a, p in zip(actions, prompts)]


# ----------------------------------------------------------------------------------------
# Protocol and determinism
# ----------------------------------------------------------------------------------------


def test_protocol_shapes_and_registry(engine):
    assert isinstance(engine, Engine) and engine.name == "doom"
    obs = engine.reset(seed=1).validate()
    assert obs.rgb.shape == (64, 64, 3) and obs.depth.shape == (64, 64)
    assert obs.instance.shape == (64, 64) and obs.instance.dtype == np.int32
    assert obs.step == 0 and engine.step(Action()).step == 1
    # centre crop of a 160x120 render: fx = (160 / 2) * 64 / 120
    np.testing.assert_allclose(obs.K, [[128 / 3, 0, 32], [0, 128 / 3, 32], [0, 0, 1]])
    e = make_engine("doom", size=32)
    assert e.reset().rgb.shape == (32, 32, 3)
    e.close()


def test_same_seed_same_everything_across_instances():
    actions = WALK[:10] + [Action(buttons={"attack"})]
    prompts = [None] * 4 + ["summon a monster"] + [None] * 6
    a, b = DoomEngine(size=64), DoomEngine(size=64)
    run_a, run_b = play(a, 7, actions, prompts), play(b, 7, actions, prompts)
    again = play(a, 7, actions, prompts)  # a reset really restarts the world
    a.close(), b.close()
    for x, y, z in zip(run_a, run_b, again):
        for field in ("rgb", "depth", "c2w", "K", "instance"):
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field))
            np.testing.assert_array_equal(getattr(x, field), getattr(z, field))
    assert (run_a[-1].instance > 0).any()  # the summoned imp is in the compared frames


# ----------------------------------------------------------------------------------------
# Pose conversion
# ----------------------------------------------------------------------------------------


def test_walking_turning_and_units(engine):
    obs = play(engine, 0, [Action(forward=0.25)] * 10 + [Action(yaw=30.0), Action(yaw=-45.0)])
    pos0, yaw0, _ = heading_from_pose(obs[0].c2w)
    # MAP01 starts at (-192, -192) units, eye 41 units above a floor at 0
    np.testing.assert_allclose(pos0, [-6.0, -6.0, 41 / UNITS_PER_M_Z])
    assert abs(pos0[2] - 1.54) < 0.01 and abs(yaw0) < 1e-6
    steps = np.diff([o.c2w[0, 3] for o in obs[:11]])  # (10,) metres along the heading (+x)
    assert np.all(steps > 0) and np.allclose([o.c2w[1, 3] for o in obs[:11]], -6.0)
    # momentum: the speed approaches the command (1 - 0.90625^(4n)), never overshoots it
    assert 0.02 < steps[0] < steps[5] < steps[-1] <= 0.25 and steps[-1] > 0.9 * 0.25
    yaws = [heading_from_pose(o.c2w)[1] for o in obs[10:]]
    assert abs(yaws[1] - yaws[0] - 30.0) < 0.05 and abs(yaws[2] - yaws[1] + 45.0) < 0.05


def test_look_is_a_shear_of_K(engine):
    obs = play(engine, 0, [Action(pitch=8.0), Action(pitch=-20.0), Action(pitch=-60.0)])
    cy = np.array([o.K[1, 2] for o in obs])
    fx = obs[0].K[0, 0]
    pitch = [8.0, -12.0, -56.0]  # the last clamped by DOOM at 56 degrees down
    np.testing.assert_allclose(cy[1:], 32 + 1.2 * fx * np.tan(np.radians(pitch)), atol=0.05)
    for o in obs:  # the pose stays level
        assert abs(heading_from_pose(o.c2w)[2]) < 1e-9


# ----------------------------------------------------------------------------------------
# Depth: the level mesh against ViZDoom's own depth buffer
# ----------------------------------------------------------------------------------------


def test_slab_triangulation_of_a_square_with_a_hole():
    outer = [(0, 0, 4, 0), (4, 0, 4, 4), (4, 4, 0, 4), (0, 4, 0, 0)]
    hole = [(1, 1, 3, 1), (3, 1, 3, 3), (3, 3, 1, 3), (1, 3, 1, 1)]
    tris = _slab_triangles(np.array(outer + hole, dtype=float))  # (m, 3, 2)
    area = 0.5 * np.abs(np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])).sum()
    assert area == pytest.approx(16 - 4)
    centroids = tris.mean(1)
    assert not np.any(np.all((centroids > 1) & (centroids < 3), axis=1))  # nothing in the hole


def test_mesh_depth_matches_the_depth_buffer():
    # size = render height: the crop is pixel-aligned with ViZDoom's buffers
    e = DoomEngine(size=120, render_size=(160, 120), monsters=False)
    rel, obs = [], e.reset(seed=0)
    for action in WALK[::2]:
        obs, buffer = e.step(action), e.depth_buffer()  # the buffer of the same state
        static = (obs.instance == 0) & np.isfinite(obs.depth) & (obs.depth < 20)
        rel.append(np.abs(buffer - obs.depth)[static] / obs.depth[static])
    e.close()
    rel = np.concatenate(rel)
    # one buffer step is 7.16 units = 0.22 m; the median pixel agrees to well under a step
    assert np.median(rel) < 0.05 and np.percentile(rel, 75) < 0.1


def test_a_line_with_one_sector_on_both_sides_is_no_wall():
    """MAP04's walk-over trigger at x = -192 units (a linedef whose two sides are one sector)
    is not drawn by the game. The mesh once made it a wall from floor to ceiling, so a start
    on it saw depth 0 everywhere and the players that read the depth never moved."""
    e = DoomEngine(size=120, render_size=(160, 120), monsters=False)
    try:
        obs = e.reset(seed=0, map="MAP04", position=(-6.0, 19.3125), yaw=-55.8)
        buffer = e.depth_buffer()
    finally:
        e.close()
    assert (obs.depth > 0.3).all()  # the player's eye is 1.5 m up, 0.5 m from any wall
    static = (obs.instance == 0) & (obs.depth < 20)
    rel = np.abs(buffer - obs.depth)[static] / obs.depth[static]
    assert np.median(rel) < 0.05


def test_warping_between_frames_matches(flat_walk):
    errors, still = [], []
    for i, k in [(0, 4), (4, 8), (8, 14), (12, 18), (16, 22), (18, 24)]:
        oi, oj = flat_walk[i], flat_walk[k]
        sprites = (oi.instance > 0) | (oj.instance > 0)
        r = reprojection_error(oi, oj, exclude=sprites)
        assert r["covisible"] > 0.2
        errors.append(r["median"])
        still.append(np.median(np.abs(oi.rgb.astype(int) - oj.rgb.astype(int)).mean(-1)))
    # with flat light a surface has one colour from every view, so only resampling is left:
    # median error <= 2 of 255 (measured 1.0), well below not warping at all
    assert np.median(errors) <= 2.0 and max(errors) <= 3.0
    assert np.median(errors) < 0.5 * np.median(still)


def test_view_warp_fills_the_gaps_a_forward_warp_leaves(flat_walk):
    """Moved a few steps on with the engine's depth, a frame lands with gaps where the view
    grew (splatting); the view warp draws every surface the frame saw, so it covers more
    and matches the engine's later frame better (what sample.paint_view paints)."""
    gain = []
    for i, k in [(0, 2), (4, 6), (8, 10), (12, 14), (16, 18)]:
        oi, oj = flat_walk[i], flat_walk[k]
        err = lambda rgb, seen: np.abs(  # noqa: E731  the mean error where drawn
            rgb.astype(int) - oj.rgb.astype(int)).mean(-1)[seen].mean()
        splat, _, landed = warp_frame(oi.rgb, oi.depth, oi.c2w, oj.c2w, oi.K)
        moved, _, seen = view_warp(oi.rgb, oi.depth, oi.c2w, oj.c2w, oi.K)
        assert seen.mean() >= landed.mean()
        gain.append(err(np.where(landed[..., None], splat, oi.rgb), seen) - err(moved, seen))
    assert np.median(gain) > 0


def test_sky_and_depth_dtype(flat_walk):
    for obs in flat_walk:  # indoors (MAP01's start room): every pixel hits something
        assert obs.depth.dtype == np.float32 and np.all(obs.depth > 0)
        assert np.all(np.isfinite(obs.depth))


# a point in MAP01's open courtyard (a sector whose ceiling flat is F_SKY1), map units
COURTYARD = (916 / UNITS_PER_M_XY, 1214 / UNITS_PER_M_XY)


def test_sky_pixels_are_infinitely_far(engine):
    engine.reset(seed=0, position=COURTYARD)
    up = engine.step(Action(pitch=30.0))
    sky = ~np.isfinite(up.depth)
    assert sky.mean() > 0.3  # looking up in the courtyard, much of the view is sky
    assert np.all(up.instance[sky] == 0)  # a sprite in front of the sky has its depth
    rows = np.nonzero(sky)[0]
    assert rows.max() < up.K[1, 2]  # sky is only above the horizon (row cy)
    down = engine.step(Action(pitch=-60.0))  # looking down: ground and walls, no sky
    assert np.all(np.isfinite(down.depth))
    engine.reset(seed=0)


# ----------------------------------------------------------------------------------------
# Prompted events
# ----------------------------------------------------------------------------------------


def test_summon_adds_a_monster(engine):
    quiet = play(engine, 0, [Action()] * 2)
    summoned = play(engine, 0, [Action()] * 2, ["an imp appears", None])
    assert summoned[1].events[0].name == "summon_monster" and summoned[1].events[0].step == 1
    assert not quiet[2].events and not summoned[2].events
    before, after = (quiet[2].instance > 0).sum(), (summoned[2].instance > 0).sum()
    assert after > before + 50  # an imp ~1.75 m ahead fills a good part of 64x64
    imp = summoned[2].instance > 0
    assert 1.0 < np.median(summoned[2].depth[imp]) < 3.0


def test_fire_and_use_prompts_press_buttons(engine):
    # the pistol is still being raised during the first step of a level; it is ready after
    fired = play(engine, 0, [Action()] * 3, [None, "fire the weapon", None])
    pressed = play(engine, 0, [Action(), Action(buttons={"attack"}), Action()])
    assert fired[2].events[0].name == "attack"
    for a, b in zip(fired, pressed):  # the prompt is exactly the button
        np.testing.assert_array_equal(a.rgb, b.rgb)
    assert engine.variable("AMMO2") == 49  # the pistol starts with 50 bullets
    play(engine, 0, [Action()] * 3)
    assert engine.variable("AMMO2") == 50
    with pytest.raises(ValueError, match="MANA9"):
        engine.variable("MANA9")
    used = play(engine, 0, [Action()], ["open the door"])
    assert used[1].events[0].name == "use"


# ----------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, word", [
    ({"map": "MAP99"}, "MAP99"), ({"wad": "doom3"}, "doom3"),
    ({"render_size": (200, 125)}, "200"), ({"size": 0}, "size"), ({"skill": 9}, "skill"),
])
def test_bad_construction_raises(kwargs, word):
    with pytest.raises(ValueError, match=word):
        DoomEngine(**kwargs)


def test_bad_step_and_reset_raise(engine):
    engine.reset(seed=0)
    with pytest.raises(ValueError, match="Action"):
        engine.step({"forward": 1.0})
    with pytest.raises(ValueError, match="MAP77"):
        engine.reset(seed=0, map="MAP77")
    with pytest.raises(ValueError, match="layout"):
        engine.reset(seed=0, layout=3)
    with pytest.raises(ValueError, match="seed"):
        engine.reset(seed=-1)
    with pytest.raises(ValueError, match="position"):
        engine.reset(seed=0, position=(1.0, float("nan")))
    with pytest.raises(ValueError, match="position"):
        engine.reset(seed=0, position="courtyard")
    assert engine.map == "MAP01" and issubclass(EpisodeFinished, RuntimeError)
    assert math.isfinite(engine.reset(seed=0, map="MAP02").c2w[0, 3])
    engine.reset(seed=0, map="MAP01")
