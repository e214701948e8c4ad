"""The full suite's protocols, in the order they run: the one list that the suite
(`full.full_suite`), the `eval --suite` choices, the progress bar and the report
(`full_report`) iterate over. A new protocol is a module under `suite/` that builds a
`suite.base.Protocol`, plus one line here.
"""

from __future__ import annotations

from .suite import events, generalisation, held_out, long, revisit, runtime
from .suite.base import Protocol

PROTOCOLS: list[Protocol] = [
    held_out.PROTOCOL,  # next chunk, drift, camera following: every model
    runtime.PROTOCOL,  # after held_out: reads its rollouts' frames/s
    revisit.PROTOCOL,  # the world alone (its KV cache and memory)
    long.PROTOCOL,  # the world alone (its KV cache)
    events.PROTOCOL,
    generalisation.PROTOCOL,
]


def names() -> list[str]:
    return [p.name for p in PROTOCOLS]


def select(chosen: list[str] | None = None) -> list[Protocol]:
    """The protocols named in `chosen` (None: all), in the registry's order; an unknown or
    repeated name raises ValueError naming it and the protocols there are."""
    known = names()
    if len(set(known)) != len(known):
        raise ValueError(f"two registered protocols share a name: {known}")
    if chosen is None:
        return list(PROTOCOLS)
    wrong = [n for n in chosen if n not in known]
    if wrong or len(set(chosen)) != len(chosen):
        raise ValueError(f"protocols must be distinct names among {known}, got {chosen}")
    return [p for p in PROTOCOLS if p.name in chosen]


def present(result: dict) -> list[Protocol]:
    """The registered protocols whose sections `result` holds: those it names under
    "protocols", else (results written before it recorded them) those whose keys are all
    there."""
    ran = result.get("protocols")
    return [p for p in PROTOCOLS
            if (p.name in ran if ran is not None else all(k in result for k in p.keys))]
