"""The Engine protocol: a ground-truth world we can play, record and replay.

An engine renders, for every step, RGB, metric z-depth, the camera pose (c2w) and intrinsics
in worldlab's conventions (see `worldlab.camera`), deterministically for a given seed: the
same seed and actions replay the same frames bit for bit. Engines convert to these
conventions at their boundary and nowhere else.

Text prompts trigger events. Every engine lists its events as `EventSpec`s with the
keywords that trigger them; `match_event(prompt, specs)` is the one place where text becomes
an event (a case-insensitive keyword match, so behaviour is predictable and documented).

Random starts (optional): an engine that can start anywhere in its world offers
`start_options(seed) -> dict`, the reset options of a start drawn from `seed` alone, on
floor the player can stand on and clear of walls, at any heading: at least
{"position": (x, y) metres, "yaw": degrees}, so `reset(seed, **engine.start_options(seed))`
starts there. Both engines have it (DOOM draws from the reachable floor of its map,
`DoomEngine.reachable_area`); an engine without it starts only at its default start, so
callers check `hasattr(engine, "start_options")`. Engines draw these starts from
`np.random.default_rng([START_STREAM, seed])`, a stream of its own, so a start does not
repeat the first numbers that other users of the same seed (scripted players) draw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ..camera import Action, check_c2w, check_K

START_STREAM = 0x57A27  # the first seed word of every start_options random stream


@dataclass(frozen=True)
class EventSpec:
    name: str  # e.g. "summon_monster"
    keywords: tuple[str, ...]  # any of these in a prompt fires the event
    description: str = ""


@dataclass
class Event:
    name: str
    text: str  # the prompt that fired it
    step: int


@dataclass
class Observation:
    """What an engine shows after reset or a step (h, w from the engine's size)."""

    rgb: np.ndarray  # (h, w, 3) uint8
    depth: np.ndarray  # (h, w) float32 metric z-depth, inf where nothing was hit
    c2w: np.ndarray  # (4, 4) float64 camera-to-world, OpenCV camera axes, +z-up world
    K: np.ndarray  # (3, 3) float64 pixels
    step: int = 0
    instance: np.ndarray | None = None  # (h, w) int32 per-pixel object ids, 0 = static scene
    events: list[Event] = field(default_factory=list)
    # instance id -> kind of the characters among them (one of the engine's
    # `character_kinds`): the labels of the events probe (`evaluate.probes`)
    things: dict[int, str] = field(default_factory=dict)

    def validate(self) -> "Observation":
        h, w = self.depth.shape if self.depth.ndim == 2 else (None, None)
        if self.rgb.dtype != np.uint8 or self.rgb.shape != (h, w, 3):
            raise ValueError(f"rgb must be uint8 (h, w, 3) matching depth {self.depth.shape}, "
                             f"got {self.rgb.dtype} {self.rgb.shape}")
        if self.depth.dtype != np.float32:
            raise ValueError(f"depth must be float32, got {self.depth.dtype}")
        check_c2w(self.c2w)
        check_K(self.K)
        return self


def match_event(prompt: str | None, specs: tuple[EventSpec, ...]) -> EventSpec | None:
    """The first event whose keyword appears in `prompt` (case-insensitive), else None."""
    if not prompt:
        return None
    text = prompt.lower()
    for spec in specs:
        if any(k in text for k in spec.keywords):
            return spec
    return None


@runtime_checkable
class Engine(Protocol):
    """A deterministic, seedable world. `size` is the square frame side in pixels.

    Optional, and therefore not part of this runtime-checked protocol:
    `start_options(seed) -> dict` (random starts, see the module docstring).
    """

    name: str
    events: tuple[EventSpec, ...]
    character_kinds: tuple[str, ...]  # the kinds `Observation.things` names

    def reset(self, seed: int = 0, **options) -> Observation: ...

    def step(self, action: Action, prompt: str | None = None) -> Observation: ...

    def close(self) -> None: ...
