"""Scripted players: reading the depth, wall avoidance, exact revisits, long looping walks,
event prompts, the registry (in the open field and one engine; revisits from random starts
in both engines: tests/test_coverage_recording.py)."""

import re

import numpy as np
import pytest

from worldlab import camera
from worldlab.engines import make_engine
from worldlab.engines.base import EventSpec, Observation, match_event
from worldlab.engines.policies import (MIX_SCHEDULE, POLICIES, AsymmetricReturn, Explore,
                                       LeaveAndReturn, Loops, RandomWalk, TurnAround,
                                       clearance, make_policy, open_directions, steer,
                                       with_events)
from worldlab.episodes.recording import record_episode, revisit_pairs
from worldlab.evaluate.revisit import return_pairs

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


def test_open_directions_leave_room_for_the_body():
    depth = np.full((SIZE, SIZE), np.inf, np.float32)
    depth[:, SIZE // 2] = 2.0  # one post 2 m ahead, a little right of the axis
    yaw, free = open_directions(depth, K, radius_m=0.25)
    assert yaw[0] > 40 and yaw[-1] < -40 and np.all(np.diff(yaw) < 0)  # left is positive
    # the columns whose line passes within 0.25 m of the post are blocked at ~2 m
    blocked = np.isfinite(free)
    assert blocked[SIZE // 2] and free[SIZE // 2] == pytest.approx(2.0, abs=0.05)
    assert not blocked[0] and not blocked[-1] and blocked.sum() <= 3
    wider = np.isfinite(open_directions(depth, K, radius_m=1.0)[1]).sum()
    assert wider > blocked.sum()  # a wider body is blocked by the post in more directions


def test_steer_reaches_a_pose_in_one_step_or_goes_part_way():
    start = camera.pose_from_heading(np.zeros(3), 30.0)
    goal = camera.pose_from_heading(np.array([0.2, -0.1, 0.0]), 75.0)
    assert np.allclose(camera.step_pose(start, steer(start, goal, 0.5, 90.0)), goal)
    part = camera.step_pose(start, steer(start, goal, 0.1, 20.0))
    p, yaw, _ = camera.heading_from_pose(part)
    assert yaw == pytest.approx(50.0) and np.linalg.norm(p) == pytest.approx(0.1)
    assert np.dot(p[:2], [0.2, -0.1]) > 0  # towards the goal


def test_turn_around_closes_the_circle_either_way():
    poses, _ = play_open_field(TurnAround(), 12)
    assert np.allclose(poses[-1], poses[0], atol=1e-9)
    yaws = [a.yaw for a in camera.actions_from_poses(poses)]
    assert np.allclose(np.abs(yaws), 30.0) and len(set(np.sign(yaws))) == 1
    short, _ = play_open_field(TurnAround(), 2)  # 90 degrees per step at most
    assert np.allclose(np.abs([a.yaw for a in camera.actions_from_poses(short)]), 90.0)
    ways = {np.sign(camera.actions_from_poses(play_open_field(TurnAround(), 4, s)[0])[0].yaw)
            for s in range(6)}
    assert ways == {-1.0, 1.0}  # the seed picks the direction


@pytest.mark.parametrize("steps", [20, 21])
def test_leave_and_return_retraces_the_outbound_path(steps):
    poses, _ = play_open_field(LeaveAndReturn(), steps, seed=1)
    n = steps // 2
    assert np.linalg.norm(poses[n, :3, 3] - poses[0, :3, 3]) > 1.0  # it went somewhere
    for k in range(n + 1):  # pose n + k is pose n - k, heading included
        assert np.allclose(poses[n + k], poses[n - k], atol=1e-6), k
    assert np.allclose(poses[-1], poses[0], atol=1e-6)


def _arrival_pairs(poses):
    """Revisit pairs (i, j) whose frame j was approached from another direction than the
    heading of frame i: the last 3 steps into j moved more than 45 degrees off it."""
    out = []
    for i, j in revisit_pairs(poses):
        _, yaw_i, _ = camera.heading_from_pose(poses[i])
        d = poses[j][:2, 3] - poses[max(0, j - 3)][:2, 3]
        moved = np.degrees(np.arctan2(d[1], d[0]))
        if np.linalg.norm(d) > 0.1 and abs(camera.wrap_degrees(moved - yaw_i)) > 45:
            out.append((i, j))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_asymmetric_return_comes_back_to_a_view_seen_before_by_another_route(seed):
    poses, _ = play_open_field(AsymmetricReturn(), 47, seed)
    pairs = revisit_pairs(poses)
    # it comes back to an outbound pose (within 0.5 m and 30 degrees, 8+ frames later) ...
    assert len({j for _, j in pairs}) >= 8
    # ... arriving from another direction than the one it faced there
    assert _arrival_pairs(poses)


def test_asymmetric_return_paths_follow_the_seed():
    paths = [play_open_field(AsymmetricReturn(), 47, s)[0] for s in (0, 1, 2, 0)]
    assert np.array_equal(paths[0], paths[3])
    assert not np.allclose(paths[0], paths[1]) and not np.allclose(paths[1], paths[2])


def test_loops_retraces_its_petals_then_repeats_them_in_the_open():
    policy = Loops(petal_steps=(5, 8))
    poses, _ = play_open_field(policy, 120, seed=2)
    (a, b), half = policy.lengths, 4  # the second petal starts with a half turn, 45 a step
    for k in range(a + 1):  # the first petal: pose a + k is pose a - k, heading included
        assert np.allclose(poses[a + k], poses[a - k], atol=1e-6), k
    assert np.linalg.norm(poses[a, :3, 3] - poses[0, :3, 3]) > 1.0  # it went somewhere
    _, yaw0, _ = camera.heading_from_pose(poses[0])
    _, yaw, _ = camera.heading_from_pose(poses[2 * a + half])
    assert abs(camera.wrap_degrees(yaw - yaw0)) == pytest.approx(180.0)  # B leaves backwards
    period = 2 * (a + b + half)  # then both petals again and again, exactly
    assert np.allclose(poses[period:], poses[:-period], atol=1e-6)
    assert not np.allclose(poses[period - 1:-1], poses[:-period])


def test_loops_keep_coming_back_in_the_procedural_engine():
    seed, frames = 1, 400
    policy = Loops()
    policy.reset(seed, frames - 1)
    start = 2 * sum(policy.lengths) + 4  # after the two fresh petals and the half turn
    ep = record_episode("procedural", seed, frames, 32, "loops")
    returns = return_pairs(ep, min_gap=100, min_overlap=0.5, start=start)
    # measured: 178 of the 178 frames after the petals (seed 0: 145 of 146)
    assert len(returns) >= (frames - start) / 3, (len(returns), frames - start)
    again = record_episode("procedural", seed, frames, 32, "loops")
    other = record_episode("procedural", seed + 1, 60, 32, "loops")
    assert np.array_equal(ep.c2w, again.c2w) and not np.allclose(ep.c2w[:60], other.c2w)


def test_loops_short_episodes_and_bad_options():
    poses, _ = play_open_field(Loops(), 8)  # still on its way out: walks every step
    assert all(abs(x.forward - 0.25) < 1e-9 for x in camera.actions_from_poses(poses))
    assert len(record_episode("procedural", 0, 9, 32, "loops")) == 9
    for bad in [(0, 5), (70, 40), (40.0, 60), (40,), 40]:
        with pytest.raises(ValueError, match=re.escape(f"got {bad!r}")):
            Loops(petal_steps=bad)
    with pytest.raises(ValueError, match="momentum"):
        Loops(momentum=1.0)


def test_explore_is_seeded_and_steps_like_the_random_walk():
    a, _ = play_open_field(Explore(), 60, seed=3)
    assert np.array_equal(a, play_open_field(Explore(), 60, seed=3)[0])
    assert not np.allclose(a, play_open_field(Explore(), 60, seed=4)[0])
    acts = camera.actions_from_poses(a)  # nothing in the way: it walks every step
    assert all(abs(x.forward - 0.25) < 1e-9 and abs(x.yaw) <= 10.0 + 1e-9 for x in acts)
    walk = Explore(min_clear_m=1.0)  # and turns away from a wall as random_walk does
    walk.reset(0, 10)
    depth = np.full((SIZE, SIZE), 3.0, np.float32)
    depth[:, SIZE // 2] = 0.6
    depth[:, SIZE - SIZE // 3:] = 0.7
    assert walk.act(obs_at(np.eye(4), depth))[0] == camera.Action(yaw=30.0)


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
    assert set(POLICIES) - {"loops"} == set(MIX_SCHEDULE)  # loops: long walks only
    names = [type(make_policy("mix", seed=s)).name for s in range(20)]
    assert set(names[:5]) == set(MIX_SCHEDULE) and names[10:] == names[:10]
    # walk, turn, symmetric, asymmetric, explore, loops: explore joined the mix, taking two
    # of random_walk's slots and one of leave_and_return's
    assert [names.count(p) for p in POLICIES] == [4, 2, 4, 4, 6, 0]
    with pytest.raises(ValueError, match="unknown policy 'dance'"):
        make_policy("dance")
    with pytest.raises(ValueError, match="momentum"):
        RandomWalk(momentum=1.0)
    with pytest.raises(ValueError, match="Action.forward"):
        RandomWalk(step_m=5.0)
    with pytest.raises(ValueError, match="momentum"):
        Explore(momentum=-0.5)
    with pytest.raises(ValueError, match="Action.yaw"):
        AsymmetricReturn(turn_deg=120.0)


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
