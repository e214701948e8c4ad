"""Scripted players: they look at the latest Observation and choose the next input.

A policy is reset with a seed and the number of steps it will be asked for, then
`act(obs) -> (Action, prompt or None)` is called once per step with the observation the
previous action produced (the reset observation first). A prompt is a text that may fire an
engine event (`engines.base.match_event`); None keeps the current one. Step sizes are in the
canonical Action units: metres and degrees per step.

    random_walk        wander with momentum, turning away from walls seen in the depth
    turn_around        turn in place through a full circle
    leave_and_return   wander out, then retrace the observed path exactly backwards
    asymmetric_return  a square loop back to the start, seen from a new direction
    mix                one of the above per episode, chosen by the seed (MIX_SCHEDULE)

`with_events(policy, engine.events, rate, seed)` sprinkles event prompts over any policy.
"""

from __future__ import annotations

import numpy as np

from ..camera import (MAX_TURN_DEG, Action, actions_from_poses, asymmetric_return,
                      leave_and_return, turn_around)
from .base import EventSpec, Observation, match_event

# ----------------------------------------------------------------------------------------
# The protocol and the reactive walker
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

    def reset(self, seed: int, steps: int) -> None:
        super().reset(seed, steps)
        self.yaw_rate = 0.0

    def act(self, obs: Observation) -> tuple[Action, str | None]:
        ahead, left, right = clearance(obs.depth)
        if ahead < self.min_clear_m:
            # keep turning the same way while blocked, so the walker does not dither
            if abs(self.yaw_rate) < 2 * self.turn_deg:
                self.yaw_rate = 3 * self.turn_deg * (1.0 if left >= right else -1.0)
            return Action(yaw=self.yaw_rate), None
        noise = self.rng.normal(0.0, self.turn_deg)
        self.yaw_rate = float(np.clip(self.momentum * self.yaw_rate
                                      + (1 - self.momentum) * noise,
                                      -self.turn_deg, self.turn_deg))
        return Action(forward=self.step_m, yaw=self.yaw_rate), None


# ----------------------------------------------------------------------------------------
# Scripted paths (camera.py trajectories), padded with idle steps to the episode length
# ----------------------------------------------------------------------------------------


class Scripted(Policy):
    """Plays a list of actions planned from the first observation, then stands still."""

    def reset(self, seed: int, steps: int) -> None:
        super().reset(seed, steps)
        self.plan: list[Action] | None = None
        self.k = 0

    def _plan(self, obs: Observation) -> list[Action]:
        raise NotImplementedError

    def act(self, obs: Observation) -> tuple[Action, str | None]:
        if self.plan is None:
            self.plan = self._plan(obs)[: self.steps]
        action = self.plan[self.k] if self.k < len(self.plan) else Action()
        self.k += 1
        return action, None


class TurnAround(Scripted):
    """Turn left in place through 360 degrees spread over the episode (at most
    MAX_TURN_DEG per step, so a short episode turns less than a full circle)."""

    name = "turn_around"

    def _plan(self, obs: Observation) -> list[Action]:
        if self.steps == 0:
            return []
        degrees = min(360.0, MAX_TURN_DEG * self.steps)
        return turn_around(self.steps, degrees).actions


class AsymmetricReturn(Scripted):
    """A square loop turning left back to the start (`camera.asymmetric_return`); the legs
    are sized to the episode and to half the free distance seen ahead at the start."""

    name = "asymmetric_return"

    def __init__(self, step_m: float = 0.25, turn_steps: int = 6):
        self.step_m, self.turn_steps = step_m, turn_steps

    def _plan(self, obs: Observation) -> list[Action]:
        turn_steps = max(1, min(self.turn_steps, self.steps // 8))
        leg = max(1, (self.steps - 3 * turn_steps) // 4)
        ahead, _, _ = clearance(obs.depth)
        step_m = min(self.step_m, 0.5 * ahead / leg) if np.isfinite(ahead) else self.step_m
        return asymmetric_return(leg, step_m, turn_steps, c2w0=obs.c2w).actions


class LeaveAndReturn(Policy):
    """Symmetric revisit: random-walk out for half the episode, then retrace the *observed*
    outbound poses backwards (`camera.leave_and_return` on the actions recovered from them,
    so a step a wall blocked is not undone twice). An odd last step stands still."""

    name = "leave_and_return"

    def __init__(self, **walk):
        self.walk = RandomWalk(**walk)

    def reset(self, seed: int, steps: int) -> None:
        super().reset(seed, steps)
        self.walk.reset(seed, steps)
        self.poses: list[np.ndarray] = []
        self.back: list[Action] | None = None
        self.k = 0

    def _plan_return(self) -> list[Action]:
        poses = np.stack(self.poses)  # (n + 1, 4, 4)
        n = len(poses) - 1
        try:
            out = actions_from_poses(poses)
        except ValueError:  # the engine moved us further than an Action can (a teleport)
            return [Action()] * n
        return leave_and_return(out, c2w0=poses[0]).actions[n:]

    def act(self, obs: Observation) -> tuple[Action, str | None]:
        half = self.steps // 2
        self.k += 1
        if self.k <= half:
            self.poses.append(obs.c2w)
            return self.walk.act(obs)
        if self.back is None:
            self.poses.append(obs.c2w)
            self.back = self._plan_return()
        i = self.k - half - 1
        return (self.back[i] if i < len(self.back) else Action()), None


# ----------------------------------------------------------------------------------------
# Event prompts and the registry
# ----------------------------------------------------------------------------------------


class WithEvents(Policy):
    """Wraps a policy; each step, with probability `rate`, adds a prompt that fires one of
    the engine's events, phrased from the spec's description and keywords."""

    def __init__(self, policy: Policy, specs: tuple[EventSpec, ...], rate: float,
                 seed: int = 0):
        if not 0 <= rate <= 1:
            raise ValueError(f"event rate must be a probability in [0, 1], got {rate!r}")
        self.inner, self.rate, self.seed = policy, rate, seed
        self.prompts = [self._prompt(s, specs) for s in specs]
        self.name = f"{policy.name}+events"

    @staticmethod
    def _prompt(spec: EventSpec, specs: tuple[EventSpec, ...]) -> str:
        """The spec's description if it fires the spec, else "<keyword>: <description>"."""
        texts = [spec.description] + [f"{k}: {spec.description}".rstrip(": ")
                                      for k in spec.keywords]
        for text in texts:
            if text and match_event(text, specs) == spec:
                return text
        raise ValueError(f"no keyword of event {spec.name!r} fires it: an earlier event's "
                         f"keywords shadow all of {spec.keywords}")

    def reset(self, seed: int, steps: int) -> None:
        super().reset(seed, steps)
        self.inner.reset(seed, steps)
        # a separate stream, so adding events does not change the walk itself
        self.rng = np.random.default_rng([self.seed, seed])

    def act(self, obs: Observation) -> tuple[Action, str | None]:
        action, prompt = self.inner.act(obs)
        if self.prompts and self.rng.random() < self.rate:
            prompt = self.prompts[self.rng.integers(len(self.prompts))]
        return action, prompt


def with_events(policy: Policy, specs, rate: float, seed: int = 0) -> Policy:
    """`policy` plus event prompts from `specs` (an engine's `events`) at `rate` per step."""
    return WithEvents(policy, tuple(specs), rate, seed)


POLICIES: dict[str, type[Policy]] = {p.name: p for p in (RandomWalk, TurnAround,
                                                         LeaveAndReturn, AsymmetricReturn)}
# "mix": seed k plays MIX_SCHEDULE[k % 10]: mostly wandering, with revisits for the memory
# to learn; a fixed cycle rather than a random draw, so small sets are diverse too (seeds
# 0-3 play all four)
# a fixed demo walk (walk, turn left, arc right; 18 steps): benchmarks and scripted play
WALK = [Action(forward=0.25)] * 6 + [Action(yaw=10.0)] * 6 + [Action(forward=0.2, yaw=-5.0)] * 6

MIX_SCHEDULE = ("random_walk", "leave_and_return", "asymmetric_return", "turn_around",
                "random_walk", "leave_and_return", "random_walk", "asymmetric_return",
                "leave_and_return", "random_walk")


def make_policy(name: str, seed: int = 0, **options) -> Policy:
    """A policy by name; "mix" picks one by seed from MIX_SCHEDULE."""
    if name == "mix":
        name = MIX_SCHEDULE[seed % len(MIX_SCHEDULE)]
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; expected one of {sorted(POLICIES)} or 'mix'")
    return POLICIES[name](**options)
