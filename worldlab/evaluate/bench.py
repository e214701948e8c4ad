"""Speed benchmarks of the engines and the world model (`python -m worldlab bench
engines|model`; `bench play` is in `play.script`).

Each prints a table and returns the JSON that the `bench` command writes under
`runs/bench/`. Speeds are measured, never asserted; compare them as ratios taken in one run.
"""

from __future__ import annotations

import time

import numpy as np

from ..engines import make_engine
from ..engines.policies import WALK
from ..memory.cache3d import reprojection_error
from ..pretrained import load_world, resolve_checkpoint
from .protocols import runtime
from .report import print_table


# ----------------------------------------------------------------------------------------
# Engines: frames per second and reprojection error against their own depth
# ----------------------------------------------------------------------------------------

def measure_engine_fps(name: str, size: int, steps: int, seed: int = 0) -> float:
    """Frames per second of `steps` engine steps on a scripted walk (reset excluded)."""
    engine = make_engine(name, size=size)
    try:
        engine.reset(seed=seed)
        t0 = time.perf_counter()
        for k in range(steps):
            engine.step(WALK[k % len(WALK)])
        return steps / (time.perf_counter() - t0)
    finally:
        engine.close()


def engine_reprojection(name: str, size: int = 64, gap: int = 5, seed: int = 0) -> dict:
    """Median colour error (0-255) of frame j warped into frame i, dynamic pixels masked."""
    static = {"procedural": {"characters": False}, "doom": {"monsters": False}}[name]
    engine = make_engine(name, size=size, **static)
    try:
        obs = [engine.reset(seed=seed)] + [engine.step(a) for a in WALK]
    finally:
        engine.close()
    errs = []
    for i in range(len(obs) - gap):
        a, b = obs[i], obs[i + gap]
        exclude = None
        if a.instance is not None:
            exclude = a.instance != 0
        errs.append(reprojection_error(a, b, exclude=exclude))
    return {"median": float(np.median([e["median"] for e in errs])),
            "p90": float(np.median([e["p90"] for e in errs])),
            "covisible": float(np.mean([e["covisible"] for e in errs])), "gap": gap}


def bench_engines(engines=("procedural", "doom"), sizes=(64, 256), steps: int = 300) -> dict:
    """Frames/s at each size and reprojection error of each engine; prints the table."""
    result, rows = {}, []
    for name in engines:
        fps = {str(s): round(measure_engine_fps(name, s, steps), 1) for s in sizes}
        rep = engine_reprojection(name)
        result[name] = {"fps": fps, "reprojection_error": rep["median"], "reprojection": rep,
                        "steps": steps}
        rows.append({"engine": name, **{f"fps@{s}": fps[str(s)] for s in sizes},
                     "reproj_median": rep["median"], "reproj_p90": rep["p90"],
                     "covisible": rep["covisible"]})
    print_table(rows, "engines (frames/s on this machine; reprojection error in 0-255 units)")
    return result


def bench_model(checkpoint=None, steps: int = 300) -> dict:
    """Streaming the world model alone (no engine, no twin): sample + decode + append per
    chunk, over `steps` frames; prints the table."""
    world = load_world(resolve_checkpoint(checkpoint))
    data = runtime(world, chunks=max(3, steps // world.chunk_frames))
    print_table([{k: v for k, v in data.items() if isinstance(v, float)}],
                "model streaming (sample + decode + append, per chunk)")
    return data
