"""Scripted players: wall avoidance, exact revisits, event prompts, the registry."""

import numpy as np
import pytest

from worldlab import camera
from worldlab.engines import make_engine
from worldlab.engines.base import EventSpec, Observation, match_event
from worldlab.engines.policies import (MIX_SCHEDULE, POLICIES, AsymmetricReturn, LeaveAndReturn,
                                       RandomWalk, TurnAround, clearance, make_policy,
                                       with_events)

SIZE = 12
K = camera.intrinsics_from_fov(SIZE, SIZE, 90.0)
SPECS = (EventSpec("summon_monster", ("monster", "imp"), "a monster appears"),
         EventSpec("rain", ("rain",), ""),
         EventSpec("fireball", ("fireball", "cast"), "a glowing ball"))


def obs_at(c2w, depth=None, step=0) -> Observation:
    depth = np.full((SIZE, SIZE), np.inf, np.float32) if depth is None else depth
    return Observation(np.zeros((SIZE, SIZE, 3), np.uint8), depth, c2w, K, step)


def play_open_field(policy, steps, seed=0):
    """Play `policy` where nothing blocks: each action moves the pose exactly
    (camera.step_pose); returns the poses (steps + 1, 4, 4) and the prompts."""
    policy.reset(seed, steps)
    poses, prompts = [camera.pose_from_heading(np.zeros(3), 30.0)], []
    for k in range(steps):
        action, prompt = policy.act(obs_at(poses[-1], step=k))
        poses.append(camera.step_pose(poses[-1], action))
        prompts.append(prompt)
    return np.stack(poses), prompts


def test_clearance_reads_the_horizon_band():
    depth = np.full((SIZE, SIZE), 5.0, np.float32)
    depth[0, SIZE // 2] = 0.1  # ceiling pixel above the band: not a wall
    depth[SIZE // 2, SIZE // 2] = 0.8
    depth[:, : SIZE // 3] = np.inf
    ahead, left, right = clearance(depth)
    assert (ahead, left, right) == (pytest.approx(0.8), np.inf, 5.0)


def test_random_walk_is_seeded_and_bounded():
    a, _ = play_open_field(RandomWalk(turn_deg=10.0), 30, seed=3)
    b, _ = play_open_field(RandomWalk(turn_deg=10.0), 30, seed=3)
    c, _ = play_open_field(RandomWalk(turn_deg=10.0), 30, seed=4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    acts = camera.actions_from_poses(a)
    assert all(abs(x.forward - 0.25) < 1e-9 and abs(x.yaw) <= 10.0 + 1e-9 for x in acts)


def test_random_walk_turns_away_from_a_wall_towards_open_space():
    walk = RandomWalk(turn_deg=10.0, min_clear_m=1.0)
    walk.reset(0, 10)
    depth = np.full((SIZE, SIZE), 3.0, np.float32)
    depth[:, SIZE // 2] = 0.6  # a wall straight ahead
    depth[:, SIZE - SIZE // 3:] = 0.7  # the right is closer than the left
    action, _ = walk.act(obs_at(np.eye(4), depth))
    assert action.forward == 0 and action.yaw == 30.0  # left = positive yaw
    # still blocked: it keeps turning the same way even if the right now looks more open
    depth[:, : SIZE // 3] = 0.5
    assert walk.act(obs_at(np.eye(4), depth))[0].yaw == 30.0


def test_turn_around_closes_the_circle():
    poses, _ = play_open_field(TurnAround(), 12)
    assert np.allclose(poses[-1], poses[0], atol=1e-9)
    assert np.allclose([a.yaw for a in camera.actions_from_poses(poses)], 30.0)
    short, _ = play_open_field(TurnAround(), 2)  # 90 degrees per step at most
    assert np.allclose([a.yaw for a in camera.actions_from_poses(short)], 90.0)


@pytest.mark.parametrize("steps", [20, 21])
def test_leave_and_return_retraces_the_outbound_path(steps):
    poses, _ = play_open_field(LeaveAndReturn(), steps, seed=1)
    n = steps // 2
    assert np.linalg.norm(poses[n, :3, 3] - poses[0, :3, 3]) > 1.0  # it went somewhere
    for k in range(n + 1):  # pose n + k is pose n - k, heading included
        assert np.allclose(poses[n + k], poses[n - k], atol=1e-6), k
    assert np.allclose(poses[-1], poses[0], atol=1e-6)


def test_asymmetric_return_comes_back_facing_another_way():
    poses, _ = play_open_field(AsymmetricReturn(), 40)
    assert np.allclose(poses[-1, :3, 3], poses[0, :3, 3], atol=1e-6)
    _, yaw0, _ = camera.heading_from_pose(poses[0])
    _, yaw1, _ = camera.heading_from_pose(poses[-1])
    assert camera.wrap_degrees(yaw1 - yaw0) == pytest.approx(-90.0)


def test_with_events_prompts_fire_their_event_and_leave_the_walk_alone():
    plain, _ = play_open_field(RandomWalk(), 40, seed=5)
    walked, prompts = play_open_field(with_events(RandomWalk(), SPECS, 0.25, seed=9), 40, 5)
    assert np.array_equal(plain, walked)  # events use their own random stream
    fired = [match_event(p, SPECS).name for p in prompts if p is not None]
    assert 4 <= len(fired) <= 20 and set(fired) == {"summon_monster", "rain", "fireball"}
    # the description when it fires its event, else "<keyword>: <description>"
    assert {p for p in prompts if p} == {"a monster appears", "rain", "fireball: a glowing ball"}
    _, none = play_open_field(with_events(RandomWalk(), SPECS, 0.0), 10)
    assert none == [None] * 10
    shadowed = SPECS + (EventSpec("monster_rain", ("rain",), "rain of monsters"),)
    with pytest.raises(ValueError, match="'monster_rain'"):
        with_events(RandomWalk(), shadowed, 0.1)
    with pytest.raises(ValueError, match="probability"):
        with_events(RandomWalk(), SPECS, 1.5)


def test_registry_and_mix():
    assert set(POLICIES) == set(MIX_SCHEDULE)
    names = [type(make_policy("mix", seed=s)).name for s in range(20)]
    assert set(names[:4]) == set(POLICIES) and names[10:] == names[:10]
    assert [names.count(p) for p in POLICIES] == [8, 2, 6, 4]  # walk, turn, symmetric, asym.
    with pytest.raises(ValueError, match="unknown policy 'dance'"):
        make_policy("dance")
    with pytest.raises(ValueError, match="momentum"):
        RandomWalk(momentum=1.0)
    with pytest.raises(ValueError, match="Action.forward"):
        RandomWalk(step_m=5.0)


def test_random_walk_in_the_procedural_engine_keeps_off_the_walls():
    engine = make_engine("procedural", size=32)
    try:
        walk = RandomWalk(min_clear_m=1.0)
        walk.reset(0, 80)
        obs, log = engine.reset(seed=0), []
        for _ in range(80):
            action = walk.act(obs)[0]
            log.append((clearance(obs.depth)[0], action.forward))
            obs = engine.step(action)
    finally:
        engine.close()
    ahead = np.array(log)  # (steps, 2): free distance ahead, forward command
    assert (ahead[ahead[:, 0] < 1.0, 1] == 0).all()  # never walks on into a near wall
    assert (ahead[:, 0] < 1.0).any() and (ahead[:, 1] > 0).sum() > 40  # met walls, moved on
    assert ahead[:, 0].min() > 0.5
