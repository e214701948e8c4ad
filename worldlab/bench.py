"""Speed benchmarks: `python -m worldlab bench engines|model|play`.

Each prints a table and writes JSON under `runs/bench/`. Speeds are measured, never
asserted; compare them as ratios taken in one run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from .camera import Action

BENCH_DIR = Path("runs") / "bench"


def write_json(path: Path, data: dict) -> Path:
    """Atomic JSON write (temp file + rename)."""
    from .atomic import atomic_write_text

    atomic_write_text(Path(path), json.dumps(data, indent=2))
    return Path(path)


def print_table(rows: list[dict], title: str = "") -> None:
    if title:
        print(title)
    if not rows:
        return
    cols = list(rows[0])
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    widths = [max(len(c), *(len(fmt(r.get(c, ""))) for r in rows)) for c in cols]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for r in rows:
        print("  ".join(fmt(r.get(c, "")).ljust(w) for c, w in zip(cols, widths)))


# ----------------------------------------------------------------------------------------
# Engines: frames per second and reprojection error against their own depth
# ----------------------------------------------------------------------------------------

WALK = [Action(forward=0.25)] * 6 + [Action(yaw=10.0)] * 6 + [Action(forward=0.2, yaw=-5.0)] * 6


def engine_fps(name: str, size: int, steps: int, seed: int = 0) -> float:
    """Frames per second of `steps` engine steps on a scripted walk (reset excluded)."""
    from .engines import make_engine

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
    from .engines import make_engine
    from .memory.cache3d import reprojection_error

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
    result, rows = {}, []
    for name in engines:
        fps = {str(s): round(engine_fps(name, s, steps), 1) for s in sizes}
        rep = engine_reprojection(name)
        result[name] = {"fps": fps, "reprojection_error": rep["median"], "reprojection": rep,
                        "steps": steps}
        rows.append({"engine": name, **{f"fps@{s}": fps[str(s)] for s in sizes},
                     "reproj_median": rep["median"], "reproj_p90": rep["p90"],
                     "covisible": rep["covisible"]})
    print_table(rows, "engines (frames/s on this machine; reprojection error in 0-255 units)")
    return result


# ----------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------


def _run(args) -> int:
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    if args.what == "engines":
        data = bench_engines(steps=args.steps)
    elif args.what == "model":  # streaming the world model alone: no engine, no twin
        from . import DATA
        from .evaluate import runtime
        from .pretrained import load_world

        world = load_world(args.checkpoint or DATA / "checkpoints" / "doom64")
        data = runtime(world, chunks=max(3, args.steps // world.chunk_frames))
        print_table([{k: v for k, v in data.items() if isinstance(v, float)}],
                    "model streaming (sample + decode + append, per chunk)")
    else:
        from .play import bench_play
        data = bench_play(args)
    print(f"wrote {write_json(out / f'{args.what}.json', data)}")
    return 0


def configure_cli(parser) -> None:
    parser.add_argument("what", choices=["engines", "model", "play"])
    parser.add_argument("--steps", type=int, default=300, help="steps to time")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--checkpoint", default=None, help="world checkpoint (model/play)")
    parser.add_argument("--out", default=str(BENCH_DIR))
    parser.set_defaults(func=_run)
