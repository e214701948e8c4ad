"""The full suite (`python -m worldlab eval --suite full`): every protocol of
`registry.PROTOCOLS`, against the engine, for a world, the peer baseline and repeat-last,
with 95% bootstrap intervals over episodes, and the probes' own held-out accuracy beside
the scores they give.

    result, strips = full_suite(world, peer=load_peer(...), probes=load_probes(...))
    result, strips = full_suite(world, protocols=["runtime"])   # some protocols only

Sections of the result (each protocol's module under `suite/` documents its own):

    next_chunk, drift, camera, walks   `suite.held_out`, every model
    runtime         `suite.runtime`: the world streaming with its KV cache; frames/s of
                    every model over its rollouts
    revisit         `suite.revisit`: the world only
    long            `suite.long`: the world only
    events          `suite.events`: prompted characters, every model
    generalisation  `suite.generalisation`: held_out on an unseen map (DOOM) or seeds

then protocols (the names run, in order), probes (their report), models, budget (what each
model cost to train: `budget.model_budget`, its records and the world's `budget` in words)
and seconds (per protocol, and the total).

Models: "world" (the checkpoint), "peer" (`evaluate.peer`, when given) and "repeat"
(`RepeatPredictor`). `SIZES` holds the suite's default sizes; a notebook or CI passes
smaller ones.
"""

from __future__ import annotations

import time
from dataclasses import asdict

from ..pretrained import World
from . import registry
from .budget import model_budget
from .predictors import RepeatPredictor, WorldPredictor
from .suite.base import SIZES, SuiteRun, SuiteSizes, suite_sizes
from .suite.walks import (GENERALISATION_MAPS, GENERALISATION_OFFSET, STRIP_STEPS,
                          suite_walks, whole)

__all__ = ["full_suite", "SuiteSizes", "SIZES", "suite_sizes", "suite_walks", "whole",
           "GENERALISATION_MAPS", "GENERALISATION_OFFSET", "STRIP_STEPS"]


def full_suite(world: World, peer=None, probes=None, sizes: SuiteSizes = SIZES,
               progress=None, engine: str | None = None,
               protocols: list[str] | None = None,
               budget: str | None = None) -> tuple[dict, dict]:
    """The `protocols` named (default: every registered one) for `world` (and the `peer`
    predictor, when given) on held-out walks of the world's engine; `probes`
    (`train.probes.Probes` of that engine) for events and camera following (skipped
    without); `budget`: what the world cost to train, in words (its records only cover its
    last runs). `progress(title)` after each protocol. Returns (result, strips: uint8 frames
    for the report, not stored in the JSON)."""
    chosen = registry.select(protocols)
    engine = engine or world.config.data.engine
    tick = progress or (lambda title: None)
    models = {"world": WorldPredictor(world)}
    if peer is not None:
        models["peer"] = peer
    models["repeat"] = RepeatPredictor(world.size, world.chunk_frames)
    run = SuiteRun(world, models, probes, sizes, engine,
                   {"engine": engine, "sizes": asdict(sizes)})
    seconds, strips = {}, {}
    for protocol in chosen:
        t0 = time.perf_counter()
        sections, more = protocol.run(run)
        if set(sections) != set(protocol.keys):
            raise ValueError(f"protocol {protocol.name!r} wrote {sorted(sections)}, but "
                             f"declares {sorted(protocol.keys)}")
        run.result.update(sections)
        strips.update(more)
        seconds[protocol.name] = time.perf_counter() - t0
        tick(protocol.title)
    result = run.result
    result["protocols"] = [p.name for p in chosen]
    result["probes"] = None if probes is None else probes.report
    result["models"] = {name: getattr(m, "name", name) for name, m in models.items()}
    result["budget"] = {"world": model_budget(world.path, budget),
                        **({} if peer is None else {"peer": model_budget(peer.path)}),
                        "repeat": None}
    result["seconds"] = {**seconds, "total": float(sum(seconds.values()))}
    return result, strips
