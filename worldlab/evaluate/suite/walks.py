"""The held-out walks the full suite's protocols record, and the frame strips of their
rollouts. Every walk starts at a random reachable place with an invulnerable player on
DOOM (so no walk ends in death) and at the level's start on the procedural engine.

Shape legend: s strip steps, h w height width.
"""

from __future__ import annotations

from ..protocols import heldout_episodes

GENERALISATION_MAPS = {"doom": ("MAP04",)}  # doom.HELDOUT_MAP: no training episode's map
GENERALISATION_OFFSET = 500_000  # procedural: seeds of other worlds than the main walks'
STRIP_STEPS = (1, 8, 16, 32)  # rollout frames shown in the strips (1-based)


def walk_options(engine: str) -> dict:
    """heldout_episodes' start and monsters for `engine`."""
    doom = engine == "doom"
    return {"start": "random" if doom else "player",
            **({"monsters": "invulnerable"} if doom else {})}


def suite_walks(engine: str, sizes, size: int, chunk_frames: int,
                generalisation: bool = False) -> list:
    """The held-out walks of next chunk, drift and camera following (`generalisation`: on
    the unseen map, or other seeds): one chunk of context, `sizes.horizon` frames and a
    chunk more; random starts and an invulnerable player on DOOM."""
    frames = 2 * chunk_frames + sizes.horizon
    maps = GENERALISATION_MAPS.get(engine) if generalisation else None
    seed = sizes.seed + (GENERALISATION_OFFSET if generalisation and not maps else 0)
    return whole(heldout_episodes(engine, sizes.episodes, frames, size, seed=seed, maps=maps,
                                  **walk_options(engine)),
                 frames, "generalisation" if generalisation else "held-out")


def whole(episodes: list, frames: int, what: str) -> list:
    """The episodes that reached `frames` frames (a DOOM walk ends early when the player
    dies or leaves the map through an exit); an error when none did."""
    kept = [ep for ep in episodes if len(ep) >= frames]
    if not kept:
        raise ValueError(f"none of the {len(episodes)} {what} walks reached {frames} frames "
                         f"(lengths {[len(ep) for ep in episodes]}; ended: "
                         f"{[ep.meta.get('ended') for ep in episodes]})")
    return kept


def walks_summary(recorded: list, scored: list, frames: int) -> dict:
    """How many walks were recorded and scored, and why the others were left out: a table
    says what it averaged over."""
    short = [ep for ep in recorded if len(ep) < frames]
    return {"recorded": len(recorded), "scored": len(scored), "frames": frames,
            "ended_early": [{"seed": ep.meta.get("seed"), "frames": len(ep),
                             "ended": ep.meta.get("ended")} for ep in short]}


def strip(rolls: dict, episodes) -> dict:
    """The first walk's engine frames and every model's rollout at STRIP_STEPS:
    {"engine" | model: uint8 (s, h, w, 3)}."""
    first = rolls[next(iter(rolls))]
    f = first["context"]
    steps = [s - 1 for s in STRIP_STEPS if s <= len(first["true"][0])]
    out = {"engine": episodes[0].rgb[[f + s for s in steps]]}
    out.update({name: r["true"][0][steps] for name, r in rolls.items()})
    return out
