"""data/results/memory.json from the runs of scripts/train_memory.sh: the reported walks'
revisit scores of every variant (one or several `eval --suite revisit` outputs over the
same walks, merged), pooled over training seeds, with the validation walks' scores that
chose the best variant, the bars of the memory issue, the budget and where it came from;
with --strip, data/results/memory_strip.png: return frames of the first reported walk, one
column each: the engine, then each world open loop, then the matched outbound engine frame.

    python scripts/ship_memory.py --report runs/memory/eval/revisit.json \
        --validation runs/memory/validate/revisit.json --best retrieval \
        --costs runs/memory/bench_cost/memory.json --strip none retrieval

With --costs (the JSON of `bench memory`, every world streamed side by side, `none` first),
each variant's cost columns come from that one run instead of the revisit runs'.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from worldlab.atomic import atomic_write_bytes, atomic_write_json
from worldlab.evaluate import heldout_episodes
from worldlab.evaluate.long import combine_seeds
from worldlab.evaluate.memory_bars import bar_rows
from worldlab.evaluate.memory_rollout import open_loop
from worldlab.evaluate.report import print_revisit, print_table, provenance
from worldlab.evaluate.revisit import POLICIES, SEED_KEYS, return_pairs
from worldlab.pretrained import load_world
from worldlab.viz import frame_grid, to_png_bytes

COMMAND = ("bash scripts/train_memory.sh data; bash scripts/train_memory.sh train VARIANT "
           "[SEED] (every variant; none and the best with seeds 0-2); package; validate; "
           "report; then python scripts/ship_memory.py")


def _merge(paths: list[Path]) -> dict:
    """One revisit output from several over the same walks (their variants joined)."""
    merged = None
    for path in paths:
        data = json.loads(path.read_text())
        if merged is None:
            merged = data
        elif data["episodes"]["seeds"] != merged["episodes"]["seeds"]:
            raise SystemExit(f"{path} scored other walks than {paths[0]}")
        else:
            merged["variants"].update(data["variants"])
    merged["seeds"] = combine_seeds(merged["variants"], SEED_KEYS)
    return merged


COST_KEYS = ("ms_per_chunk", "cost_ratio_chunk100_chunk2", "growth_vs_first", "ms_vs_first",
             "memory_tokens_per_frame")


def _with_costs(result: dict, path: Path) -> None:
    """Each variant's cost columns from one `bench memory` run (the worlds side by side);
    a variant the bench did not time keeps none."""
    bench = json.loads(path.read_text())
    if bench["baseline"] != "none":
        raise SystemExit(f"{path} timed against {bench['baseline']!r}; name none first")
    for name, v in result["variants"].items():
        c = bench["worlds"].get(name)
        v.update({k: None if c is None else c[k] for k in COST_KEYS} |
                 {"cost_chunks": 0 if c is None else c["chunks"]})
    result["cost_baseline"], result["costs_from"] = "none", str(path)


def _score(result: dict, name: str, key: str) -> float:
    """A variant's score pooled over its training seeds when it has several."""
    pooled = result["seeds"].get(name)
    return pooled[key]["mean"] if pooled else result["variants"][name][key]


def bars(result: dict, best: str) -> dict:
    """The values the issue's bars (`evaluate.memory_bars.MEMORY_BARS`) judge: best minus
    none on return frames and on all frames, tokens against uncompressed retrieval, and
    every variant's cost."""
    v = result["variants"]
    timed = {k: r for k, r in v.items() if r.get("ms_per_chunk") is not None}  # seeds: not
    none_ms = v["none"]["ms_per_chunk"]
    side_by_side = result.get("cost_baseline") == "none"  # timed in one run against none
    over_none = [r["ms_vs_first"] if side_by_side else r["ms_per_chunk"] / none_ms
                 for r in timed.values()]
    out = {"best": best,
           "best_minus_none_return_db": _score(result, best, "return_psnr")
           - _score(result, "none", "return_psnr"),
           "best_minus_none_all_frames_db": _score(result, best, "all_frames_psnr")
           - _score(result, "none", "all_frames_psnr")}
    if timed:  # runs scored with --cost-chunks 0 have no cost bars
        out["cost_ratio_max"] = max(r["cost_ratio_chunk100_chunk2"] for r in timed.values())
        out["ms_per_chunk_over_none_max"] = max(over_none)
    if timed and side_by_side:  # the growth a memory adds over none's
        out["growth_vs_none_max"] = max(r["growth_vs_first"] for r in timed.values())
    if "tokens" in v and "retrieval" in v:
        out["tokens_fewer_than_retrieval_x"] = (v["retrieval"]["memory_tokens_per_frame"]
                                                / v["tokens"]["memory_tokens_per_frame"])
        out["tokens_minus_retrieval_return_db"] = (v["tokens"]["return_psnr"]
                                                   - v["retrieval"]["return_psnr"])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", nargs="+", type=Path, required=True,
                    help="revisit.json of the reported walks (several: subsets of worlds)")
    ap.add_argument("--validation", nargs="*", type=Path, default=[],
                    help="revisit.json of the validation walks")
    ap.add_argument("--best", required=True, help="the variant the validation walks chose")
    ap.add_argument("--costs", type=Path, default=None,
                    help="bench memory's JSON: the cost columns, every world side by side")
    ap.add_argument("--budget", default="", help="the training budget, in words")
    ap.add_argument("--note", default="", help="anything a reader must know")
    ap.add_argument("--out", type=Path, default=Path("data/results/memory.json"))
    ap.add_argument("--strip", nargs="*", default=[], metavar="NAME",
                    help="worlds (under runs/memory/worlds/) for the strip, in column order")
    ap.add_argument("--steps", type=int, default=8, help="sampling steps of the strip")
    args = ap.parse_args(argv)
    result = _merge(args.report)
    if args.costs is not None:
        _with_costs(result, args.costs)
    validation = _merge(args.validation) if args.validation else None
    keep = ("return_psnr", "return_ssim", "self_consistency_psnr", "all_frames_psnr")
    result.update(
        best=args.best, bars=bars(result, args.best), budget=args.budget, note=args.note,
        validation=None if validation is None else {
            "episodes": validation["episodes"],
            "variants": {k: {key: r[key] for key in keep}
                         for k, r in validation["variants"].items()}},
        **provenance(COMMAND), arguments=list(argv if argv is not None else sys.argv[1:]))
    print_revisit(result)
    print_table(bar_rows(result["bars"]), f"the memory bars (best: {args.best}; "
                                          f"evaluate.memory_bars)")
    print("wrote", atomic_write_json(args.out, result))
    if args.strip:
        _strip(args.strip, result["episodes"], args.steps, args.out.with_name("memory_strip.png"))
    return 0


def _strip(names: list[str], episodes: dict, steps: int, out: Path) -> None:
    """Three return frames of the first reported walk (the widest gaps), as rows: engine |
    each world | the matched outbound engine frame."""
    worlds = {n: load_world(Path("runs/memory/worlds") / n, device="cpu",
                            sample={"steps": steps}) for n in names}
    size = next(iter(worlds.values())).size
    frames = episodes["frames"]  # per scored walk
    walk = heldout_episodes("doom", 1, frames[0] if isinstance(frames, list) else frames, size,
                            seed=episodes["seeds"][0],
                            policy=POLICIES, start="random",
                            monsters="invulnerable")[0]
    pairs = sorted(return_pairs(walk), key=lambda p: p[0] - p[1])[-3:]
    frames = {n: open_loop(w, walk, seed=0)["frames"] for n, w in worlds.items()}
    rows = []
    for j, i, _ in sorted(pairs):
        rows += [walk.rgb[j]] + [frames[n][j] for n in names] + [walk.rgb[i]]
    grid = frame_grid(np.stack(rows), cols=len(names) + 2, pad=2)
    atomic_write_bytes(out, to_png_bytes(grid))
    print("wrote", out, "returns (frame, matched outbound):", [(j, i) for j, i, _ in pairs])


if __name__ == "__main__":
    raise SystemExit(main())
