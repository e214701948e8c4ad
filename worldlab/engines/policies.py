"""Scripted players: they look at the latest Observation and choose the next input.

A policy is reset with a seed and the number of steps it will be asked for, then
`act(obs) -> (Action, prompt or None)` is called once per step with the observation the
previous action produced (the reset observation first). A prompt is a text that may fire an
engine event (`engines.base.match_event`); None keeps the current one. Step sizes are in the
canonical Action units: metres and degrees per step. Every random choice comes from the
seed, so two seeds walk two different paths from the same start.

    random_walk        wander with momentum, turning away from walls seen in the depth
    explore            walk far: straight legs, drawn to open places not yet walked
    turn_around        turn in place through a full circle, left or right
    leave_and_return   wander out, then steer back through the outbound poses in reverse
    asymmetric_return  out, a bend, back to an outbound pose by another route, then the
                       view seen before
    loops              two petals out from the start and back, then both walked again in
                       turn: long walks that keep coming back (not in the mix)
    mix                one of the above per episode, chosen by the seed (MIX_SCHEDULE)

The players that come back steer on the observed pose every step (`steer`), not on a
replayed plan: DOOM's player slides on after a command and walls stop it, so open-loop
actions do not retrace a path there.

`with_events(policy, engine.events, rate, seed)` sprinkles event prompts over any policy.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..camera import (MAX_TURN_DEG, Action, heading_from_pose, pose_from_heading,
                      turn_around, wrap_degrees)
from .base import EventSpec, Observation, match_event

# ----------------------------------------------------------------------------------------
# The protocol, reading the depth, steering to a pose
# ----------------------------------------------------------------------------------------


class Policy:
    """Base class: `reset(seed, steps)`, then `act(obs)` once per step."""

    name = "policy"

    def reset(self, seed: int, steps: int) -> None:
        if not (isinstance(steps, int) and steps >= 0):
            raise ValueError(f"steps must be a non-negative integer, got {steps!r}")
        self.rng = np.random.default_rng(seed)
        self.steps = steps

    def act(self, obs: Observation) -> tuple[Action, str | None]:
        raise NotImplementedError


def clearance(depth: np.ndarray) -> tuple[float, float, float]:
    """(ahead, left, right) free distance in metres from a (h, w) z-depth map.

    `ahead` is the nearest hit in the centre column over the middle third of the rows (the
    band around the horizon: the floor and ceiling near the bottom and top are not walls);
    left / right are the median depth of the outer thirds of that band (inf = open).
    """
    h, w = depth.shape
    band = depth[h // 3: h - h // 3]  # (h/3, w)
    ahead = float(band[:, w // 2].min())
    return ahead, float(np.median(band[:, : w // 3])), float(np.median(band[:, w - w // 3:]))


def open_directions(depth: np.ndarray, K: np.ndarray,
                    radius_m: float = 0.25) -> tuple[np.ndarray, np.ndarray]:
    """(yaw (w,), free (w,)): for each image column, the turn in degrees that faces it
    (left positive) and how far a body of `radius_m` could walk that way: the distance to
    the first of the nearest hits over the horizon band (as `clearance`, one per column,
    seen from above) that lies within `radius_m` of that line. inf = nothing in view.
    The default is less than a player's radius (procedural 0.3 m, DOOM 0.5 m): a wall
    beside a player walking along it is not in the way, and both engines slide a player
    along what it grazes."""
    h, w = depth.shape
    z = depth[h // 3: h - h // 3].min(axis=0).astype(np.float64)  # (w,) nearest hit
    slope = (np.arange(w) + 0.5 - K[0, 2]) / K[0, 0]  # (w,) x / z of each column
    seen = np.isfinite(z)
    px, pz = slope[seen] * z[seen], z[seen]  # (n,) hits seen from above: right, ahead
    a = np.arctan(slope)[:, None]  # (w, 1) the direction of each column, right positive
    along = pz * np.cos(a) + px * np.sin(a)  # (w, n)
    across = px * np.cos(a) - pz * np.sin(a)
    free = np.where((np.abs(across) < radius_m) & (along > 0), along, np.inf).min(
        axis=1, initial=np.inf)
    return -np.degrees(a[:, 0]), free


def steer(c2w: np.ndarray, target: np.ndarray, max_move: float, max_turn: float) -> Action:
    """The action that takes pose `c2w` to pose `target` (horizontal position and
    heading) in one step as far as `max_move` metres and `max_turn` degrees allow (turn
    first, then move, as `camera.step_pose`). Exact where nothing blocks the move."""
    pos, yaw, _ = heading_from_pose(c2w)
    goal, goal_yaw, _ = heading_from_pose(target)
    turn = float(np.clip(wrap_degrees(goal_yaw - yaw), -max_turn, max_turn))
    d = (goal - pos)[:2]
    dist = float(np.hypot(*d))
    if dist > max_move:
        d = d * (max_move / dist)
    y = math.radians(yaw + turn)
    return Action(forward=float(d[0] * math.cos(y) + d[1] * math.sin(y)),
                  right=float(d[0] * math.sin(y) - d[1] * math.cos(y)), yaw=turn)


# ----------------------------------------------------------------------------------------
# Reactive walkers
# ----------------------------------------------------------------------------------------


class RandomWalk(Policy):
    """Walk forward, turning smoothly at random; turn away when a wall is closer than
    `min_clear_m` straight ahead (towards the more open side, without moving)."""

    name = "random_walk"

    def __init__(self, step_m: float = 0.25, turn_deg: float = 10.0, momentum: float = 0.8,
                 min_clear_m: float = 1.0):
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
        Action(forward=step_m, yaw=3 * turn_deg)  # raises if the step sizes are out of range
        self.step_m, self.turn_deg = step_m, turn_deg
        self.momentum, self.min_clear_m = momentum, min_clear_m
        self.noise_deg = turn_deg  # the spread of the random turns

    def reset(self, seed: int, steps: int) -> None:
        super().reset(seed, steps)
        self.yaw_rate = 0.0

    def act(self, obs: Observation) -> tuple[Action, str | None]:
        return self._step(obs), None

    def _step(self, obs: Observation, blocked: bool = False, pull: float = 0.0) -> Action:
        """Turn away from a wall (or when `blocked`), else walk on, the turn rate following
        a random turn plus `pull` degrees through the momentum."""
        ahead, left, right = clearance(obs.depth)
        if blocked or ahead < self.min_clear_m:
            # keep turning the same way while blocked, so the walker does not dither
            if abs(self.yaw_rate) < 2 * self.turn_deg:
                self.yaw_rate = 3 * self.turn_deg * (1.0 if left >= right else -1.0)
            return Action(yaw=self.yaw_rate)
        want = self.rng.normal(0.0, self.noise_deg) + pull
        self.yaw_rate = float(np.clip(self.momentum * self.yaw_rate + (1 - self.momentum) * want,
                                      -self.turn_deg, self.turn_deg))
        return Action(forward=self.step_m, yaw=self.yaw_rate)


class Explore(RandomWalk):
    """Walk far: a random walk with long straight legs, drawn to places it has not been.

    It steers as `random_walk` (smooth turns; at a wall it turns towards the more open side,
    the same way until clear), with less noise (`drift_deg`, so legs run straight) and a
    pull, `pull` times the bearing error, towards a target: of the far points it has seen
    open (free for `far_m` or more, `open_directions`; one per square metre, kept 1.5 m
    short of what the ray hit, where a walker can stand), the one furthest (up to 6 m) from
    every place walked, the nearest among equals. The target changes when reached (1.5 m);
    one it got stuck on (walking on moved less than 40% of a step: a ledge below the
    horizon band, a wall slid along) or did not reach in `patience` steps is forgotten.

    Measured from random starts (`explore` / `random_walk`, means): procedural, 12 seeds,
    2 m cells visited 23.0 / 18.1 and farthest distance from the start 16.2 / 10.5 m in 200
    steps, 16.6 / 13.9 and 13.7 / 8.7 m in 127; DOOM MAP01 and MAP03, 10 episodes of 300
    steps: 28.5 / 25.2 cells, 22.0 / 21.8 m. It needs metric depth: DOOM's coarse buffer
    (`metric_depth=False`) saturates short of `far_m`, so it walks as a straighter random
    walk there."""

    name = "explore"

    def __init__(self, step_m: float = 0.25, turn_deg: float = 10.0, momentum: float = 0.8,
                 min_clear_m: float = 1.0, drift_deg: float = 3.0, pull: float = 1.0,
                 far_m: float = 4.0, patience: int = 40):
        super().__init__(step_m, turn_deg, momentum, min_clear_m)
        self.noise_deg, self.pull, self.far_m, self.patience = drift_deg, pull, far_m, patience

    def reset(self, seed: int, steps: int) -> None:
        super().reset(seed, steps)
        self.visited: list[np.ndarray] = []  # (2,) positions
        self.frontier: dict[tuple, np.ndarray] = {}  # square metre -> a far point seen open
        self.target, self.since = None, 0  # a frontier cell, steps since it was chosen
        self.run, self.last = 0, None  # steps walked on, the position before the last

    def act(self, obs: Observation) -> tuple[Action, str | None]:
        pos, now, _ = heading_from_pose(obs.c2w)
        pos = pos[:2]
        self.visited.append(pos)
        self._remember(obs, now)
        stuck = self.run >= 3 and np.hypot(*(pos - self.last)) < 0.4 * self.step_m
        self.since += 1
        if self.target is not None and (stuck or self.since > self.patience):
            del self.frontier[self.target]
            self.target = None
        if self.target is None or np.hypot(*(self.frontier[self.target] - pos)) < 1.5:
            self.target, self.since = self._pick(pos), 0
        pull = 0.0
        if self.target is not None:
            d = self.frontier[self.target] - pos
            pull = self.pull * float(wrap_degrees(math.degrees(math.atan2(d[1], d[0])) - now))
        action = self._step(obs, stuck, pull)
        self.run, self.last = (self.run + 1, pos) if action.forward else (0, None)
        return action, None

    def _remember(self, obs: Observation, now: float) -> None:
        yaw, free = open_directions(obs.depth, obs.K)
        far = free >= self.far_m
        a = np.radians(now + yaw[far])
        # short of the hit: a point on a wall would stay new for ever, out of reach
        reach = np.minimum(free[far], 2 * self.far_m)[:, None] - 1.5
        for end in obs.c2w[:2, 3] + reach * np.stack([np.cos(a), np.sin(a)], axis=1):
            self.frontier[tuple(np.floor(end).astype(int))] = end

    def _pick(self, pos: np.ndarray) -> tuple | None:
        """The frontier cell furthest from where the walker has been; None if none is 1.5 m
        from it."""
        if not self.frontier:
            return None
        cells = list(self.frontier)
        points = np.stack([self.frontier[c] for c in cells])  # (n, 2)
        visited = np.stack(self.visited[::4] + self.visited[-1:])  # (m, 2)
        away = np.linalg.norm(points[:, None] - visited[None], axis=-1).min(axis=1)
        best = int(np.argmax(np.minimum(away, 6.0) - 0.01 * np.hypot(*(points - pos).T)))
        return cells[best] if away[best] >= 1.5 else None


# ----------------------------------------------------------------------------------------
# Routes: players written as generators that yield actions and are sent observations
# ----------------------------------------------------------------------------------------


class Routed(Policy):
    """A policy whose `_route(obs)` generator yields each action and receives the
    observation it produced; when the route ends the player stands still. Phases are
    sub-generators that return the latest observation (`obs = yield from ...`)."""

    step_m, turn_deg = 0.25, 45.0

    def reset(self, seed: int, steps: int) -> None:
        super().reset(seed, steps)
        self._run, self.used = None, 0  # the route; steps played so far

    def _route(self, obs: Observation):
        raise NotImplementedError

    def act(self, obs: Observation) -> tuple[Action, str | None]:
        self.used += 1
        try:
            if self._run is None:
                self._run = self._route(obs)
                return next(self._run), None
            return self._run.send(obs), None
        except StopIteration:
            return Action(), None

    def _walk(self, obs: Observation, steps: int, track: list | None = None,
              min_clear_m: float = 1.0):
        """Walk straight on for `steps` steps or until a wall is nearer than `min_clear_m`;
        append every pose reached to `track`."""
        for _ in range(steps):
            if clearance(obs.depth)[0] < min_clear_m:
                break
            obs = yield Action(forward=self.step_m)
            if track is not None:
                track.append(obs.c2w)
        return obs

    def _turn_to(self, obs: Observation, yaw: float, track: list | None = None):
        """Turn in place to heading `yaw` (degrees), the shorter way; append every pose
        reached to `track`."""
        for _ in range(math.ceil(180 / self.turn_deg) + 1):
            error = float(wrap_degrees(yaw - heading_from_pose(obs.c2w)[1]))
            if abs(error) < 0.5:
                break
            obs = yield Action(yaw=float(np.clip(error, -self.turn_deg, self.turn_deg)))
            if track is not None:
                track.append(obs.c2w)
        return obs

    def _go_to(self, obs: Observation, point: np.ndarray, tol_m: float = 0.3,
               sidestep_m: float = 1.0):
        """Walk to `point`, facing the way there; sidestep the last `sidestep_m` instead
        of turning, so an overshoot (DOOM's slide) is not met by a turn around."""
        dist = np.hypot(*(point - obs.c2w[:3, 3])[:2])
        for _ in range(int(2 * dist / self.step_m) + 8):
            pos, yaw, _ = heading_from_pose(obs.c2w)
            d = (point - pos)[:2]
            dist = float(np.hypot(*d))
            if dist <= tol_m:
                break
            if dist < sidestep_m:
                action = steer(obs.c2w, pose_from_heading(point, yaw), self.step_m, 0.0)
            else:
                error = float(wrap_degrees(math.degrees(math.atan2(d[1], d[0])) - yaw))
                turn = float(np.clip(error, -self.turn_deg, self.turn_deg))
                action = Action(forward=self.step_m if abs(error - turn) < 20 else 0.0,
                                yaw=turn)
            obs = yield action
        return obs

    def _settle(self, obs: Observation, pose: np.ndarray, steps: int = 8):
        """Steer onto `pose` (position and heading) until within 5 cm and 2 degrees."""
        p, yaw, _ = heading_from_pose(pose)
        for _ in range(steps):
            q, now, _ = heading_from_pose(obs.c2w)
            if np.hypot(*(p - q)[:2]) < 0.05 and abs(wrap_degrees(yaw - now)) < 2:
                break
            obs = yield steer(obs.c2w, pose, self.step_m, self.turn_deg)
        return obs


class TurnAround(Routed):
    """Turn in place through 360 degrees spread over the episode, left or right by the
    seed (at most MAX_TURN_DEG per step, so a short episode turns less than a circle)."""

    name = "turn_around"

    def _route(self, obs: Observation):
        sign = float(self.rng.choice((1.0, -1.0)))
        if self.steps:
            for action in turn_around(self.steps, sign * min(360.0, MAX_TURN_DEG
                                                             * self.steps)).actions:
                yield action


class LeaveAndReturn(Routed):
    """Symmetric revisit: random-walk out for half the episode, then steer back through
    the *observed* outbound poses in reverse, one per step (`steer`, so a step a wall
    blocked or DOOM's slide is corrected on the way). In the open, pose n + k is pose
    n - k exactly. What is left of the episode holds the first pose."""

    name = "leave_and_return"

    def __init__(self, **walk):
        self.walk = RandomWalk(**walk)

    def reset(self, seed: int, steps: int) -> None:
        super().reset(seed, steps)
        self.walk.reset(seed, steps)

    def _route(self, obs: Observation):
        poses = []
        for _ in range(self.steps // 2):
            poses.append(obs.c2w)
            obs = yield self.walk.act(obs)[0]
        yield from self._steer_through(obs, poses[::-1]
                                       + poses[:1] * (self.steps - 2 * len(poses)))

    def _steer_through(self, obs: Observation, poses: list):
        """Steer onto each of `poses` in turn, one step each (`steer`)."""
        # twice the walking pace: room to catch up after a blocked or sliding step
        move = 2 * self.walk.step_m
        for pose in poses:
            obs = yield steer(obs.c2w, pose, move, MAX_TURN_DEG)
        return obs


class AsymmetricReturn(Routed):
    """Revisit from another direction, in excursions while the episode lasts: face open
    space, walk out, bend left or right, come back to an outbound pose by another route,
    face its heading and walk the rest of the outbound leg again.

    Leg lengths, bend side and angle, and the outbound pose to come back to are drawn from
    the seed; legs stop at walls. The way back is the straight line to that pose when the
    depth shows it clear, else the outbound track in reverse (facing the way back); both
    arrive from a direction the outbound walk did not face there. The re-walk shows the
    views seen before (`recording.revisit_pairs`)."""

    name = "asymmetric_return"

    def __init__(self, step_m: float = 0.25, turn_deg: float = 45.0, min_clear_m: float = 1.0):
        Action(forward=step_m, yaw=turn_deg)  # raises if the step sizes are out of range
        self.step_m, self.turn_deg, self.min_clear_m = step_m, turn_deg, min_clear_m

    def _route(self, obs: Observation):
        # legs of a third of the steps left beyond five half turns: the way back takes up
        # to twice the way out (DOOM's slide, the corners of the track); a last excursion
        # the episode cuts short is still a walk, not frames of standing still
        turns = 5 * math.ceil(180 / self.turn_deg)
        while (left := self.steps - self.used) >= turns // 2:
            obs = yield from self._excursion(obs, max(3, (left - turns) // 3))

    def _excursion(self, obs: Observation, legs: int):
        first = max(2, round(legs * self.rng.uniform(0.5, 0.75)))
        bend = float(self.rng.choice((-1.0, 1.0)) * self.rng.uniform(60.0, 120.0))
        obs = yield from self._face_open(obs, first * self.step_m + self.min_clear_m)
        track = [obs.c2w]
        obs = yield from self._walk(obs, first, track, self.min_clear_m)
        k = int(self.rng.integers(len(track) // 2 + 1))  # the pose to come back to
        obs = yield from self._turn_to(obs, heading_from_pose(obs.c2w)[1] + bend)
        obs = yield from self._walk(obs, legs - first, track, self.min_clear_m)
        obs = yield from self._come_back(obs, track[k], track)
        obs = yield from self._settle(obs, track[k])
        return (yield from self._walk(obs, first - k, None, self.min_clear_m))

    def _face_open(self, obs: Observation, need_m: float):
        """Turn to the most open direction in view until one is free for `need_m` (at most
        a full circle of looks, each a seeded quarter turn)."""
        sign = float(self.rng.choice((-1.0, 1.0)))
        for _ in range(4):
            yaw, free = open_directions(obs.depth, obs.K)
            best = int(np.argmax(np.minimum(free, need_m) + 1e-3 * sign * yaw))
            if free[best] >= need_m:
                return (yield from self._turn_to(obs, heading_from_pose(obs.c2w)[1]
                                                 + yaw[best]))
            obs = yield from self._turn_to(obs, heading_from_pose(obs.c2w)[1] + 90 * sign)
        return obs

    def _come_back(self, obs: Observation, anchor: np.ndarray, track: list):
        goal = anchor[:3, 3]
        d = (goal - obs.c2w[:3, 3])[:2]
        obs = yield from self._turn_to(obs, math.degrees(math.atan2(d[1], d[0])))
        yaw, free = open_directions(obs.depth, obs.K)
        if free[len(free) // 2] <= np.hypot(*d) + 0.5:
            for pose in _thin(track[::-1], 0.5):  # breadcrumbs back along the outbound track
                obs = yield from self._go_to(obs, pose[:3, 3], sidestep_m=0.0)
        # the last half metre turns and moves at once (`_settle`)
        return (yield from self._go_to(obs, goal, 0.5))


class Loops(LeaveAndReturn):
    """Long walks that come back again and again: petals out from the start pose (the
    anchor) and back, a figure-eight around it.

    The first two petals are fresh: face the start heading (the second petal: the opposite
    one), random-walk out for L steps (`lengths`, drawn from `petal_steps` by the seed),
    then steer back through the *observed* outbound poses in reverse to the anchor, as
    `leave_and_return` does, so every step back revisits an outbound view. From the third
    petal on the two recorded petals are walked again in turn (A, B, A, ...): steered out
    through their poses in order, back in reverse. From frame 2 (L_A + L_B) on (plus the
    second petal's half turn) every frame revisits a view seen at least one petal, 2 L or
    more frames, earlier; in the open the walk repeats with that period exactly. The
    episode's steps cut the last petal short. `walk` options go to the `RandomWalk`."""

    name = "loops"

    def __init__(self, petal_steps: tuple[int, int] = (40, 70), **walk):
        ints = (isinstance(petal_steps, (tuple, list)) and len(petal_steps) == 2
                and all(isinstance(n, int) and not isinstance(n, bool) for n in petal_steps))
        if not (ints and 1 <= petal_steps[0] <= petal_steps[1]):
            raise ValueError(f"petal_steps must be a pair of step counts (low, high) with "
                             f"1 <= low <= high, got {petal_steps!r}")
        self.petal_steps = tuple(petal_steps)
        super().__init__(**walk)

    def reset(self, seed: int, steps: int) -> None:
        super().reset(seed, steps)
        low, high = self.petal_steps
        # the walking steps of the two fresh petals (L_A, L_B)
        self.lengths = tuple(int(n) for n in self.rng.integers(low, high + 1, size=2))

    def _route(self, obs: Observation):
        yaw = heading_from_pose(obs.c2w)[1]  # the anchor's heading
        petals = []
        for face, steps in zip((0.0, 180.0), self.lengths):  # the second leaves the other way
            track = [obs.c2w]
            obs = yield from self._turn_to(obs, yaw + face, track)
            obs = yield from self._wander(obs, steps, track)
            obs = yield from self._steer_through(obs, track[-2::-1])
            petals.append(track)
        for track in itertools.cycle(petals):  # until the episode stops asking
            obs = yield from self._steer_through(obs, track[1:])
            obs = yield from self._steer_through(obs, track[-2::-1])

    def _wander(self, obs: Observation, steps: int, track: list):
        """Random-walk `steps` steps; append every pose reached to `track`."""
        for _ in range(steps):
            obs = yield self.walk.act(obs)[0]
            track.append(obs.c2w)
        return obs



def _thin(poses: list, spacing_m: float) -> list:
    """Every pose at least `spacing_m` from the last one kept (the first is kept)."""
    kept = poses[:1]
    for pose in poses[1:]:
        if np.hypot(*(pose[:2, 3] - kept[-1][:2, 3])) >= spacing_m:
            kept.append(pose)
    return kept


# ----------------------------------------------------------------------------------------
# Event prompts and the registry
# ----------------------------------------------------------------------------------------


def event_prompt(spec: EventSpec, specs: tuple[EventSpec, ...]) -> str:
    """The prompt recordings use for an event: the spec's description if it fires the spec
    (among `specs`, an engine's `events`), else "<keyword>: <description>"."""
    texts = [spec.description] + [f"{k}: {spec.description}".rstrip(": ")
                                  for k in spec.keywords]
    for text in texts:
        if text and match_event(text, specs) == spec:
            return text
    raise ValueError(f"no keyword of event {spec.name!r} fires it: an earlier event's "
                     f"keywords shadow all of {spec.keywords}")


def check_event_schedule(specs, rate: float, every: int = 1,
                         kinds: tuple[str, ...] | None = None) -> None:
    """Raise ValueError naming the first bad value of an event schedule (`WithEvents`):
    `rate` a probability, `every` a positive step count, `kinds` some of `specs`' names."""
    if not 0 <= rate <= 1:
        raise ValueError(f"event rate must be a probability in [0, 1], got {rate!r}")
    if not (isinstance(every, int) and every >= 1):
        raise ValueError(f"event every must be a positive number of steps, got {every!r}")
    names = [s.name for s in specs]
    if kinds is not None and (not kinds or any(k not in names for k in kinds)):
        raise ValueError(f"event kinds must be some of the engine's events {names}, got "
                         f"{kinds!r}")


class WithEvents(Policy):
    """Wraps a policy; at every `every`-th step (1-based: the step that produces frame i,
    so `every` = a world's chunk_frames puts each prompt on a chunk's first frame), with
    probability `rate`, adds a prompt that fires one of the engine's events (of `kinds`
    only, when given), phrased from the spec's description and keywords."""

    def __init__(self, policy: Policy, specs: tuple[EventSpec, ...], rate: float,
                 seed: int = 0, every: int = 1, kinds: tuple[str, ...] | None = None):
        check_event_schedule(specs, rate, every, kinds)
        self.inner, self.rate, self.seed, self.every = policy, rate, seed, every
        self.prompts = [event_prompt(s, specs) for s in specs
                        if kinds is None or s.name in kinds]
        self.name = f"{policy.name}+events"

    def reset(self, seed: int, steps: int) -> None:
        super().reset(seed, steps)
        self.inner.reset(seed, steps)
        # a separate stream, so adding events does not change the walk itself
        self.rng = np.random.default_rng([self.seed, seed])
        self.step = 0

    def act(self, obs: Observation) -> tuple[Action, str | None]:
        action, prompt = self.inner.act(obs)
        self.step += 1
        if self.step % self.every == 0 and self.prompts and self.rng.random() < self.rate:
            prompt = self.prompts[self.rng.integers(len(self.prompts))]
        return action, prompt


def with_events(policy: Policy, specs, rate: float, seed: int = 0, every: int = 1,
                kinds: tuple[str, ...] | None = None) -> Policy:
    """`policy` plus event prompts from `specs` (an engine's `events`; of `kinds` only,
    when given) at `rate` per `every`-th step."""
    return WithEvents(policy, tuple(specs), rate, seed, every, kinds)


class WithPrompts(Policy):
    """Wraps a policy; adds the prompt `prompts[i]` at step i (1-based: the step that
    produces frame i), whatever the policy says then: scripted events for evaluation."""

    def __init__(self, policy: Policy, prompts: dict[int, str]):
        bad = [k for k, v in prompts.items()
               if not (isinstance(k, int) and k >= 1 and isinstance(v, str) and v)]
        if bad:
            raise ValueError(f"prompts must map steps >= 1 to non-empty strings, got "
                             f"{ {k: prompts[k] for k in bad} }")
        self.inner, self.prompts = policy, dict(prompts)
        self.name = f"{policy.name}+prompts"

    def reset(self, seed: int, steps: int) -> None:
        super().reset(seed, steps)
        self.inner.reset(seed, steps)
        self.step = 0

    def act(self, obs: Observation) -> tuple[Action, str | None]:
        action, prompt = self.inner.act(obs)
        self.step += 1
        return action, self.prompts.get(self.step, prompt)


POLICIES: dict[str, type[Policy]] = {p.name: p for p in (RandomWalk, TurnAround,
                                                         LeaveAndReturn, AsymmetricReturn,
                                                         Explore, Loops)}
# a fixed demo walk (walk, turn left, arc right; 18 steps): benchmarks and scripted play
WALK = [Action(forward=0.25)] * 6 + [Action(yaw=10.0)] * 6 + [Action(forward=0.2, yaw=-5.0)] * 6

# "mix": seed k plays MIX_SCHEDULE[k % 10]: half wandering (explore reaches new rooms,
# random_walk turns more), four revisits for the memory to learn, one turn in place; a
# fixed cycle rather than a random draw, so small sets are diverse too (seeds 0-4 play all
# five); loops is for the long-horizon walks only
MIX_SCHEDULE = ("random_walk", "leave_and_return", "asymmetric_return", "turn_around",
                "explore", "explore", "leave_and_return", "random_walk", "asymmetric_return",
                "explore")


def make_policy(name: str, seed: int = 0, **options) -> Policy:
    """A policy by name; "mix" picks one by seed from MIX_SCHEDULE."""
    if name == "mix":
        name = MIX_SCHEDULE[seed % len(MIX_SCHEDULE)]
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; expected one of {sorted(POLICIES)} or 'mix'")
    return POLICIES[name](**options)
