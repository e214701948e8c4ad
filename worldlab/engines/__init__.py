"""Ground-truth worlds: `make_engine("procedural" | "doom", **options)`.

Both implement `worldlab.engines.base.Engine`; see that module for the protocol.
"""

from __future__ import annotations

import importlib

from .base import Engine, Event, EventSpec, Observation, match_event

ENGINES = {
    "procedural": ("worldlab.engines.procedural", "ProceduralEngine"),
    "doom": ("worldlab.engines.doom", "DoomEngine"),
}


def engine_class(name: str) -> type:
    """The class of an engine by name (its `events` and `character_kinds`, unopened)."""
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; expected one of {sorted(ENGINES)}")
    module, cls = ENGINES[name]
    return getattr(importlib.import_module(module), cls)


def make_engine(name: str, **options) -> Engine:
    """Construct an engine by name; options go to its constructor (e.g. size=64)."""
    return engine_class(name)(**options)


__all__ = ["Engine", "Event", "EventSpec", "Observation", "match_event", "make_engine",
           "engine_class", "ENGINES"]
