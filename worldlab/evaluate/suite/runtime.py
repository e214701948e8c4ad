"""Runtime: the world streaming with its KV cache (`protocols.runtime`), and the frames/s
of every model over its drift rollouts when `held_out` ran before (repeat-last's is not a
model's speed, so the table leaves it out).

Section: runtime {"world": protocols.runtime's scores, model: {"fps"}}.
"""

from __future__ import annotations

from ..protocols import runtime
from .base import Protocol, Row, SuiteRun


def _run(run: SuiteRun) -> tuple[dict, dict]:
    rollouts = {name: {"fps": d["frames_per_s"]}
                for name, d in run.result.get("drift", {}).items()}
    return {"runtime": {"world": runtime(run.world, run.sizes.runtime_chunks),
                        **rollouts}}, {}


def _rows(result: dict) -> list[Row]:
    return [("runtime", "frames/s (world: streaming with its KV cache)",
             {m: v.get("fps") for m, v in result["runtime"].items() if m != "repeat"})]


PROTOCOL = Protocol("runtime", "runtime", ("runtime",), _run, _rows)
