"""Revisit: coming back to views seen before (`evaluate.revisit`), on held-out walks of the
revisit players. It streams with the world's KV cache and memory, so it scores the world
alone and says so; a set of walks none of which comes back to a view is "skipped".

Section: revisit (`revisit.revisit`'s result + models, note) or {"skipped": why}.
"""

from __future__ import annotations

from ..protocols import heldout_episodes
from ..revisit import POLICIES, return_pairs, revisit
from .base import Protocol, Row, SuiteRun
from .walks import walk_options


def _run(run: SuiteRun) -> tuple[dict, dict]:
    s = run.sizes
    walks = heldout_episodes(run.engine, s.revisit_walks, s.revisit_frames, run.world.size,
                             POLICIES, seed=s.seed, **walk_options(run.engine))
    if not any(return_pairs(ep, start=run.world.chunk_frames) for ep in walks):
        return {"revisit": {"skipped": f"none of the {len(walks)} revisit walks comes back "
                                       f"to a view it saw (`revisit.return_pairs`)"}}, {}
    r = revisit({"world": run.world}, walks, cost_chunks=s.cost_chunks)
    return {"revisit": {**r, "models": ["world"],
                        "note": "streams with the world's KV cache and memory: the world "
                                "only"}}, {}


def _interval(mean, ci) -> dict | float:
    return {"mean": mean, "lo": ci[0], "hi": ci[1], "n": None} if ci else mean


def _rows(result: dict) -> list[Row]:
    r = result["revisit"]
    if "skipped" in r:
        return [("revisit", "skipped", {"world": r["skipped"]})]
    rv, refs = r["variants"]["world"], r.get("references") or {}
    return [("revisit", "return-frame PSNR (dB)",
             {"world": _interval(rv["return_psnr"], rv.get("return_psnr_ci")),
              "repeat": (refs.get("repeat") or {}).get("return_psnr")})]


PROTOCOL = Protocol("revisit", "revisit", ("revisit",), _run, _rows)
