"""The full suite (`python -m worldlab eval --suite full`): every protocol, against the
engine, for a world, the peer baseline and repeat-last, with 95% bootstrap intervals over
episodes, and the probes' own held-out accuracy beside the scores they give.

    result, strips = full_suite(world, peer=load_peer(...), probes=load_probes(...))

Sections of the result (each protocol's own module documents its scores):

    next_chunk      teacher-forced next chunk (`protocols.next_chunk`), every model
    drift           open-loop rollouts with true and mirrored controls (`protocols`)
    camera          camera following, per control, on the same rollouts (`camera_follow`)
    runtime         the world streaming with its KV cache (`protocols.runtime`); frames/s
                    of every model over its rollouts
    revisit         coming back to views seen before (`revisit`): the world only
    long            a long open-loop walk against drift-free and autoencoder references
                    (`long`): the world only
    events          prompted characters: hits and false alarms (`events`), every model
    generalisation  next chunk, drift and camera following on a map no training episode
                    visits (DOOM: `HELDOUT_MAP`); the procedural engine's held-out seeds
                    are unseen worlds already, so there it repeats the main walks' seeds
                    shifted by `GENERALISATION_OFFSET`

Models: "world" (the checkpoint), "peer" (`evaluate.peer`, when given) and "repeat"
(`RepeatPredictor`). Revisit and long horizon need a streaming world with a KV cache, so
they score the world alone and say so. `SIZES` holds the suite's default sizes; a
notebook or CI passes smaller ones.

Shape legend: t frames, h w height width.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ..pretrained import World
from .camera_follow import camera_scores
from .events import event_scores, event_walks
from .intervals import bootstrap
from .long import long_horizon
from .predictors import RepeatPredictor, WorldPredictor
from .protocols import (HELDOUT_SEED, drift_scores, heldout_episodes, next_chunk, open_loop,
                        runtime)
from .revisit import POLICIES as REVISIT_POLICIES
from .revisit import return_pairs, revisit

GENERALISATION_MAPS = {"doom": ("MAP04",)}  # doom.HELDOUT_MAP: no training episode's map
GENERALISATION_OFFSET = 500_000  # procedural: seeds of other worlds than the main walks'
STRIP_STEPS = (1, 8, 16, 32)  # rollout frames shown in the strips (1-based)


@dataclass(frozen=True)
class SuiteSizes:
    """How much of each protocol runs (the defaults: the shipped table, ~15 min on 2
    cores for the 64 px world)."""

    episodes: int = 8  # next chunk, drift, camera, generalisation walks
    horizon: int = 32  # open-loop frames
    starts: int = 4  # next-chunk starts per walk
    runtime_chunks: int = 50
    revisit_walks: int = 8
    revisit_frames: int = 96
    cost_chunks: int = 50  # revisit: chunks streamed to time the world with memory
    long_walks: int = 2
    long_frames: int = 600
    event_walks: int = 24
    seed: int = HELDOUT_SEED

    def __post_init__(self):
        for name, v in asdict(self).items():
            if not isinstance(v, int) or v < (0 if name == "cost_chunks" else 1):
                raise ValueError(f"suite size {name} must be a positive integer, got {v!r}")


SIZES = SuiteSizes()


def _psnr_section(models: dict, episodes, sizes: SuiteSizes) -> tuple[dict, dict]:
    """Next chunk, drift and camera following (when a motion probe is given) for every
    model on the same walks; (section, rollouts per model)."""
    nxt, drift, rolls = {}, {}, {}
    for name, model in models.items():
        if not isinstance(model, RepeatPredictor):
            n = next_chunk(model, episodes, sizes.starts, seed=0)
            nxt[name] = {**n, "psnr": bootstrap(n["next_chunk_psnr_per_episode"])}
            if name == "world":
                nxt["repeat"] = {"psnr": bootstrap(n["baseline_repeat_psnr_per_episode"])}
        rolls[name] = open_loop(model, episodes, sizes.horizon)
        d = drift_scores(rolls[name], episodes)
        drift[name] = {**d, "psnr": bootstrap(d["rollout_psnr_per_episode"]),
                       "mirrored_drop_db": bootstrap(d["mirrored_drop_per_episode"]),
                       "frames_per_s": rolls[name]["frames"] / rolls[name]["seconds"]}
    return {"next_chunk": nxt, "drift": drift}, rolls


def suite_walks(engine: str, sizes: SuiteSizes, size: int, chunk_frames: int,
                generalisation: bool = False) -> list:
    """The held-out walks of next chunk, drift and camera following (`generalisation`: on
    the unseen map, or other seeds): one chunk of context, `sizes.horizon` frames and a
    chunk more; random starts and an invulnerable player on DOOM."""
    frames = 2 * chunk_frames + sizes.horizon
    maps = GENERALISATION_MAPS.get(engine) if generalisation else None
    opts = {"monsters": "invulnerable"} if engine == "doom" else {}
    seed = sizes.seed + (GENERALISATION_OFFSET if generalisation and not maps else 0)
    return whole(heldout_episodes(engine, sizes.episodes, frames, size, seed=seed,
                                  start="random" if engine == "doom" else "player",
                                  maps=maps, **opts),
                 frames, "generalisation" if generalisation else "held-out")


def whole(episodes: list, frames: int, what: str) -> list:
    """The episodes that reached `frames` frames (DOOM ends one early when the player
    leaves the map through an exit); an error when none did."""
    kept = [ep for ep in episodes if len(ep) >= frames]
    if not kept:
        raise ValueError(f"none of the {len(episodes)} {what} walks reached {frames} frames "
                         f"(lengths {[len(ep) for ep in episodes]})")
    return kept


def _camera(rolls: dict, episodes, probes) -> dict:
    if probes is None:
        return {"skipped": "no probes given"}
    return {name: camera_scores(r, episodes, probes.motion) for name, r in rolls.items()}


def _strip(rolls: dict, episodes) -> dict:
    """The first walk's engine frames and every model's rollout at STRIP_STEPS:
    {"engine" | model: uint8 (len(STRIP_STEPS), h, w, 3)}."""
    f = rolls[next(iter(rolls))]["context"]
    steps = [s - 1 for s in STRIP_STEPS if s <= len(rolls[next(iter(rolls))]["true"][0])]
    out = {"engine": episodes[0].rgb[[f + s for s in steps]]}
    out.update({name: r["true"][0][steps] for name, r in rolls.items()})
    return out


def full_suite(world: World, peer=None, probes=None, sizes: SuiteSizes = SIZES,
               progress=None, engine: str | None = None) -> tuple[dict, dict]:
    """Every protocol for `world` (and the `peer` predictor, when given) on held-out walks
    of the world's engine; `probes` (`train.probes.Probes` of that engine) for events and
    camera following (skipped without). `progress(name)` after each section. Returns
    (result, strips: uint8 frames for the report, not stored in the JSON)."""
    engine = engine or world.config.data.engine
    tick = progress or (lambda name: None)
    models = {"world": WorldPredictor(world)}
    if peer is not None:
        models["peer"] = peer
    models["repeat"] = RepeatPredictor(world.size, world.chunk_frames)
    f, seconds, result = world.chunk_frames, {}, {"engine": engine, "sizes": asdict(sizes)}
    t0 = time.perf_counter()
    walk_frames = f + sizes.horizon + f
    doom = {"monsters": "invulnerable"} if engine == "doom" else {}
    eps = suite_walks(engine, sizes, world.size, f)
    section, rolls = _psnr_section(models, eps, sizes)
    result.update(section, walks={"count": len(eps), "frames": walk_frames,
                                  "seeds": [ep.meta.get("seed") for ep in eps]})
    result["camera"] = _camera(rolls, eps, probes)
    strips = {"main": _strip(rolls, eps)}
    seconds["next_chunk+drift+camera"] = time.perf_counter() - t0
    tick("next chunk, drift, camera")

    t0 = time.perf_counter()
    result["runtime"] = {"world": runtime(world, sizes.runtime_chunks),
                         **{name: {"fps": d["frames_per_s"]}
                            for name, d in result["drift"].items()}}
    seconds["runtime"] = time.perf_counter() - t0
    tick("runtime")

    t0 = time.perf_counter()
    walks = heldout_episodes(engine, sizes.revisit_walks, sizes.revisit_frames, world.size,
                             REVISIT_POLICIES, seed=sizes.seed,
                             start="random" if engine == "doom" else "player", **doom)
    if any(return_pairs(ep, start=f) for ep in walks):
        r = revisit({"world": world}, walks, cost_chunks=sizes.cost_chunks)
        result["revisit"] = {**r, "models": ["world"],
                             "note": "streams with the world's KV cache and memory: the "
                                     "world only"}
    else:
        result["revisit"] = {"skipped": f"none of the {len(walks)} revisit walks comes back "
                                        f"to a view it saw (`revisit.return_pairs`)"}
    seconds["revisit"] = time.perf_counter() - t0
    tick("revisit")

    t0 = time.perf_counter()
    long_walks = heldout_episodes(engine, sizes.long_walks, sizes.long_frames, world.size,
                                  "mix", seed=sizes.seed,
                                  start="random" if engine == "doom" else "player", **doom)
    lh = long_horizon(world, long_walks)
    result["long"] = {**lh, "psnr_late": bootstrap(lh["psnr_late_per_walk"]),
                      "models": ["world"], "note": "streams with the world's KV cache: the "
                                                   "world only"}
    seconds["long"] = time.perf_counter() - t0
    tick("long horizon")

    t0 = time.perf_counter()
    if probes is None:
        result["events"] = {"skipped": "no probes given"}
    else:
        walks = event_walks(engine, sizes.event_walks, world.size, f)
        result["events"] = event_scores(models, walks, probes)
    seconds["events"] = time.perf_counter() - t0
    tick("events")

    t0 = time.perf_counter()
    maps = GENERALISATION_MAPS.get(engine)
    gen_eps = suite_walks(engine, sizes, world.size, f, generalisation=True)
    section, gen_rolls = _psnr_section(models, gen_eps, sizes)
    result["generalisation"] = {**section, "camera": _camera(gen_rolls, gen_eps, probes),
                                "maps": maps, "walks": len(gen_eps),
                                "seeds": [ep.meta.get("seed") for ep in gen_eps]}
    strips["generalisation"] = _strip(gen_rolls, gen_eps)
    seconds["generalisation"] = time.perf_counter() - t0
    tick("generalisation")

    result["probes"] = None if probes is None else probes.report
    result["models"] = {name: getattr(m, "name", name) for name, m in models.items()}
    result["seconds"] = {**seconds, "total": float(sum(seconds.values()))}
    return result, strips


def suite_sizes(specs: list[str]) -> SuiteSizes:
    """`SIZES` with "KEY=N" overrides (the CLI's --full-size); a bad key or value names
    itself and the keys there are."""
    fields = asdict(SIZES)
    over = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or key.strip() not in fields or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"a suite size is KEY=N with KEY one of {sorted(fields)}, got "
                             f"{spec!r}")
        over[key.strip()] = int(value)
    return SuiteSizes(**{**fields, **over})
