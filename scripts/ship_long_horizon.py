"""data/results/long_horizon.json from the runs of scripts/train_long_horizon.sh: the reported
walks' scores of every method (one `eval --suite long` output, or several over subsets of
the worlds, merged), pooled over training seeds, with the validation walk's scores that
chose the best method, each world's quick-suite next-chunk score, and where it came from;
with --strip, data/results/long_horizon_strip.png: the first reported walk at steps 1, 250,
500 and 996 after its first chunk, the engine then each world open loop.

    python scripts/ship_long_horizon.py --report runs/long/report/long.json \
        --validation runs/long/validate/*.json --quick runs/long/quick/*/quick.json \
        --best self_rollout --strip teacher_forcing self_rollout
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from worldlab.atomic import atomic_write_bytes, atomic_write_json
from worldlab.evaluate import heldout_episodes, rollout_strip
from worldlab.evaluate.long import combine_seeds
from worldlab.evaluate.report import print_long, provenance
from worldlab.pretrained import load_world
from worldlab.viz import to_png_bytes

STRIP_AT = (1, 250, 500, 996)  # steps after the first chunk of a 1,000-frame walk

COMMAND = ("bash scripts/train_long_horizon.sh train METHOD [SEED] (each method; "
           "teacher_forcing and self_rollout with seeds 0-2), package, validate, report, "
           "quick teacher_forcing, quick self_rollout; then python scripts/ship_long_horizon.py")


def _merge(paths: list[Path]) -> tuple[dict, dict]:
    """The methods of several long-suite outputs (their walks must be the same) and the
    episodes record they share."""
    methods, episodes = {}, None
    for path in paths:
        data = json.loads(path.read_text())
        if episodes is not None and data["episodes"] != episodes:
            raise SystemExit(f"{path} scored other walks: {data['episodes']} != {episodes}")
        episodes = data["episodes"]
        methods.update(data["methods"])
    return methods, episodes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", nargs="+", type=Path, required=True,
                    help="long.json of the reported walks (several: subsets of the worlds)")
    ap.add_argument("--validation", nargs="*", type=Path, default=[],
                    help="long.json of the validation walk")
    ap.add_argument("--quick", nargs="*", type=Path, default=[],
                    help="quick.json of worlds (runs/long/quick/NAME/quick.json)")
    ap.add_argument("--best", required=True, help="the method the validation walk chose")
    ap.add_argument("--note", default="", help="anything a reader must know")
    ap.add_argument("--out", type=Path, default=Path("data/results/long_horizon.json"))
    ap.add_argument("--strip", nargs="*", default=[], metavar="NAME",
                    help="worlds (under runs/long/worlds/) for the strip, in row order")
    ap.add_argument("--steps", type=int, default=8, help="sampling steps of the strip")
    args = ap.parse_args(argv)
    methods, episodes = _merge(args.report)
    validation, val_episodes = _merge(args.validation) if args.validation else ({}, None)
    keep = ("psnr_late", "psnr_drift_free_late", "psnr_repeat_late",
            "sharpness_ratio_vs_drift_free_late", "sharpness_ratio_vs_ae_late",
            "motion_ratio_vs_ae_late", "colour_distance_late")
    quick = {p.parent.name: json.loads(p.read_text()) for p in args.quick}
    quick = {name: {k: q[k] for k in ("next_chunk_psnr", "rollout_psnr_mean", "sampling_steps")}
             for name, q in quick.items()}
    result = {"methods": methods, "seeds": combine_seeds(methods), "episodes": episodes,
              "best": args.best,
              "validation": {"episodes": val_episodes,
                             "methods": {k: {key: v[key] for key in keep}
                                         for k, v in validation.items()}},
              "quick_next_chunk": quick, "note": args.note, **provenance(COMMAND)}
    print_long(methods, result["seeds"])
    print("wrote", atomic_write_json(args.out, result))
    if args.strip:
        _strip(args.strip, episodes, args.steps, args.out.with_name("long_horizon_strip.png"))
    return 0


def _strip(names: list[str], episodes: dict, steps: int, out: Path) -> None:
    """The first reported walk (the same seed, start and monsters) open loop per world."""
    worlds = {n: load_world(Path("runs/long/worlds") / n, device="cpu",
                            sample={"steps": steps}) for n in names}
    size = next(iter(worlds.values())).size
    walk = heldout_episodes("doom", 1, episodes["frames"], size, seed=episodes["seeds"][0],
                            start=episodes["start"], monsters=episodes["monsters"])[0]
    atomic_write_bytes(out, to_png_bytes(rollout_strip(worlds, walk, STRIP_AT)))
    print("wrote", out)


if __name__ == "__main__":
    raise SystemExit(main())
