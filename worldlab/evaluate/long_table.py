"""`table long-horizon`: the long-horizon table on random walks
(data/results/long_horizon_random_walks.json) from the runs of the long-horizon experiment:
the reported walks' scores of every method (one `eval --suite long` output, or several over
subsets of the worlds, merged), pooled over training seeds (`long.pool_methods`), with the
validation walk's scores that chose the best method and each world's quick-suite next-chunk
score; with --strip, long_horizon_strip.png beside the JSON: the first reported walk at steps
1, 250, 500 and 996 after its first chunk, the engine then each world open loop.

    python -m worldlab table long-horizon --report runs/long/report/long.json \
        --validation runs/long/validate/*.json --quick runs/long/quick/*/quick.json \
        --best self_rollout --strip teacher_forcing self_rollout
"""

from __future__ import annotations

from pathlib import Path

from ..atomic import atomic_write_bytes
from ..pretrained import load_world
from ..viz import to_png_bytes
from .long import pool_methods
from .protocols import heldout_episodes
from .report import print_long
from .strip import rollout_strip
from .table_io import beside, read_json, write_table

STRIP_AT = (1, 250, 500, 996)  # steps after the first chunk of a 1,000-frame walk
STRIP = "long_horizon_strip.png"
LONG = "an `eval --suite long` output (methods, episodes)"
KEEP = ("psnr_late", "psnr_drift_free_late", "psnr_repeat_late",
        "sharpness_ratio_vs_drift_free_late", "sharpness_ratio_vs_ae_late",
        "motion_ratio_vs_ae_late", "colour_distance_late")
QUICK_KEYS = ("next_chunk_psnr", "rollout_psnr_mean", "sampling_steps")


def merge(paths: list) -> tuple[dict, dict]:
    """The methods of several long-suite outputs (their walks must be the same) and the
    episodes record they share."""
    methods, episodes = {}, None
    for path in paths:
        data = read_json(path, ("methods", "episodes"), LONG)
        if episodes is not None and data["episodes"] != episodes:
            raise ValueError(f"{path} scored other walks: {data['episodes']} != {episodes}")
        episodes = data["episodes"]
        methods.update(data["methods"])
    return methods, episodes


def long_table(report: list, best: str, validation: list = (), quick: list = (),
               note: str = "") -> dict:
    """The long-horizon table from the long-suite outputs `report` (and `validation`), the
    method the validation walk chose (`best`) and the quick-suite outputs `quick` (each at
    <dir>/NAME/quick.json: NAME is the world)."""
    methods, episodes = merge(report)
    if best not in methods:
        raise ValueError(f"--best {best!r} is not a method of the reported walks; they have "
                         f"{sorted(methods)}")
    val, val_episodes = merge(validation) if validation else ({}, None)
    quick = {Path(p).parent.name: read_json(p, QUICK_KEYS, "an `eval --suite quick` output")
             for p in quick}
    return {"methods": methods, "seeds": pool_methods(methods), "episodes": episodes,
            "best": best,
            "validation": {"episodes": val_episodes,
                           "methods": {k: {key: v[key] for key in KEEP}
                                       for k, v in val.items()}},
            "quick_next_chunk": {name: {k: q[k] for k in QUICK_KEYS}
                                 for name, q in quick.items()},
            "note": note}


def cli(args) -> int:
    """`table long-horizon`: the table, printed and written to --out; the strip beside it."""
    result = long_table(args.report, args.best, args.validation, args.quick, args.note)
    print_long(result["methods"], result["seeds"])
    write_table(args.out, result)
    if args.strip:
        strip(args.strip, Path(args.worlds), result["episodes"], args.steps,
              beside(args.out, STRIP))
    return 0


def strip(names: list[str], worlds_dir: Path, episodes: dict, steps: int, out: Path) -> None:
    """The first reported walk (the same seed, start and monsters) open loop per world."""
    worlds = {n: load_world(worlds_dir / n, device="cpu", sample={"steps": steps})
              for n in names}
    size = next(iter(worlds.values())).size
    walk = heldout_episodes("doom", 1, episodes["frames"], size, seed=episodes["seeds"][0],
                            start=episodes["start"], monsters=episodes["monsters"])[0]
    atomic_write_bytes(out, to_png_bytes(rollout_strip(worlds, walk, STRIP_AT)))
    print("wrote", out)
