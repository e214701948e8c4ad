"""Generalisation: next chunk, drift and camera following (as `held_out`) on a map no
training episode visits (DOOM: `walks.GENERALISATION_MAPS`); the procedural engine's
held-out seeds are unseen worlds already, so there it repeats the main walks' seeds shifted
by `walks.GENERALISATION_OFFSET`.

Section: generalisation {next_chunk, drift, camera, maps, walks (count), seeds}.
"""

from __future__ import annotations

from .base import Protocol, Row, SuiteRun
from .held_out import camera, drift_figure, psnr_rows, psnr_section
from .walks import GENERALISATION_MAPS, strip, suite_walks


def _run(run: SuiteRun) -> tuple[dict, dict]:
    eps = suite_walks(run.engine, run.sizes, run.world.size, run.world.chunk_frames,
                      generalisation=True)
    section, rolls = psnr_section(run.models, eps, run.sizes)
    return {"generalisation": {**section, "camera": camera(rolls, eps, run.probes),
                               "maps": GENERALISATION_MAPS.get(run.engine),
                               "walks": len(eps),
                               "seeds": [ep.meta.get("seed") for ep in eps]}}, \
        {"generalisation": strip(rolls, eps)}


def _rows(result: dict) -> list[Row]:
    gen = result["generalisation"]
    where = f"unseen map {','.join(gen['maps'])}" if gen.get("maps") else "unseen seeds"
    return psnr_rows(gen, where, result.get("probes"))


def _figures(result: dict) -> list:
    return [drift_figure(result["generalisation"]["drift"],
                         "open-loop PSNR per step, unseen map / seeds")]


PROTOCOL = Protocol("generalisation", "generalisation", ("generalisation",), _run, _rows,
                    _figures)
