"""`table memory`: the memory table (data/results/memory.json) from the revisit runs of the
memory experiment: the reported walks' revisit scores of every variant (one or several
`eval --suite revisit` outputs over the same walks, merged), pooled over training seeds,
with the validation walks' scores that chose the best variant, the bars of the memory issue
(`memory_bars`), best minus none walk by walk (`stats.paired`), the budget; with --strip,
memory_strip.png beside the JSON: return frames of the first reported walk, one column
each: the engine, then each world open loop, then the matched outbound engine frame.

    python -m worldlab table memory --report runs/memory/eval/revisit.json \
        --validation runs/memory/validate/revisit.json --best retrieval \
        --costs runs/memory/bench_cost/memory.json --strip none retrieval

With --costs (the JSON of `bench memory`, every world streamed side by side, `none` first),
each variant's cost columns come from that one run instead of the revisit runs'.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..atomic import atomic_write_bytes
from ..paths import relative
from ..pretrained import load_world
from ..viz import frame_grid, to_png_bytes
from .memory_bars import bar_rows
from .memory_rollout import open_loop
from .protocols import heldout_episodes
from .report import print_revisit, print_table
from .revisit import POLICIES, pool_variants, return_pairs
from .stats import paired, seed_average, seed_groups
from .table_io import PROVENANCE, beside, read_json, write_table

REVISIT = "an `eval --suite revisit` output (variants, episodes)"
KEEP = ("return_psnr", "return_ssim", "self_consistency_psnr", "all_frames_psnr")
COST_KEYS = ("ms_per_chunk", "cost_ratio_chunk100_chunk2", "growth_vs_first", "ms_vs_first",
             "memory_tokens_per_frame")
STRIP = "memory_strip.png"


def merge(paths: list) -> dict:
    """One revisit output from several over the same walks (their variants joined), with
    the variants trained at several seeds pooled (`revisit.pool_variants`)."""
    merged = None
    for path in paths:
        data = read_json(path, ("variants", "episodes"), REVISIT)
        if merged is None:
            merged = data
        elif data["episodes"].get("seeds") != merged["episodes"].get("seeds"):
            raise ValueError(f"{path} scored other walks than {paths[0]}: seeds "
                             f"{data['episodes'].get('seeds')} != "
                             f"{merged['episodes'].get('seeds')}")
        else:
            merged["variants"].update(data["variants"])
    merged["seeds"] = pool_variants(merged["variants"])
    return {k: v for k, v in merged.items() if k not in PROVENANCE}


def with_costs(result: dict, path) -> None:
    """Each variant's cost columns from one `bench memory` run (the worlds side by side);
    a variant the bench did not time keeps none."""
    bench = read_json(path, ("baseline", "worlds"), "a `bench memory` output")
    if bench["baseline"] != "none":
        raise ValueError(f"{path} timed against {bench['baseline']!r}; name none first")
    for name, v in result["variants"].items():
        c = bench["worlds"].get(name)
        v.update({k: None if c is None else c[k] for k in COST_KEYS} |
                 {"cost_chunks": 0 if c is None else c["chunks"]})
    result["cost_baseline"], result["costs_from"] = "none", relative(path)


def _score(result: dict, name: str, key: str) -> float:
    """A variant's score pooled over its training seeds when it has several."""
    pooled = result["seeds"].get(name)
    return pooled[key]["mean"] if pooled else result["variants"][name][key]


def _check_variant(result: dict, name: str, flag: str) -> None:
    if name not in result["variants"]:
        raise ValueError(f"{flag} {name!r} is not a variant of the reported walks; they "
                         f"have {sorted(result['variants'])}")


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


def best_minus_none(result: dict, best: str) -> dict:
    """Best minus none walk by walk (`stats.paired`) on each walk's mean return and
    all-frames PSNR, each side averaged over its training seeds first; None for a key a
    side has no per-walk values of."""
    groups = seed_groups(result["variants"])
    out = {}
    for key in ("return_psnr", "all_frames_psnr"):
        sides = [{n: result["variants"][n].get("per_episode", {}).get(key)
                  for n in groups[name]} for name in (best, "none")]
        if any(w is None for side in sides for w in side.values()):
            out[key] = None
            continue
        out[key] = paired(*(seed_average(side) for side in sides))
    return out


def memory_table(report: list, best: str, validation: list = (), costs=None,
                 budget: str = "", note: str = "") -> dict:
    """The memory table from the revisit outputs `report` (and `validation`), the variant
    the validation walks chose (`best`) and `bench memory`'s JSON (`costs`)."""
    result = merge(report)
    for name, flag in ((best, "--best"), ("none", "the baseline")):
        _check_variant(result, name, flag)
    if costs is not None:
        with_costs(result, costs)
    val = merge(validation) if validation else None
    result.update(
        best=best, bars=bars(result, best), best_minus_none=best_minus_none(result, best),
        budget=budget, note=note,
        validation=None if val is None else {
            "episodes": val["episodes"],
            "variants": {k: {key: r[key] for key in KEEP} for k, r in val["variants"].items()}})
    return result


def cli(args) -> int:
    """`table memory`: the table, printed and written to --out; the strip beside it."""
    result = memory_table(args.report, args.best, args.validation, args.costs, args.budget,
                          args.note)
    print_revisit(result)
    print_table(bar_rows(result["bars"]), f"the memory bars (best: {args.best}; "
                                          f"evaluate.memory_bars)")
    write_table(args.out, result)
    if args.strip:
        strip(args.strip, Path(args.worlds), result["episodes"], args.steps,
              beside(args.out, STRIP))
    return 0


def strip(names: list[str], worlds_dir: Path, episodes: dict, steps: int, out: Path) -> None:
    """Three return frames of the first reported walk (the widest gaps), as rows: engine |
    each world | the matched outbound engine frame."""
    worlds = {n: load_world(worlds_dir / n, device="cpu", sample={"steps": steps})
              for n in names}
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
