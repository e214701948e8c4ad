"""`table loops`: the long-horizon methods (several training seeds each, rows "x",
"x_seed1", ...) scored by the long-horizon protocol (`long.py`) on the same held-out walks
of the `loops` player, which come back again and again to places seen more than 100 frames
before, so late frames have a target the world has seen. Every method is paired walk by
walk with `--reference` (the `teacher_forcing` baseline) of the same seed on the late PSNR,
beside repeat-last, warp-last, the autoencoder and the reference's drift-free stream (a
next-chunk score: the engine's chunks as context all along).

    python -m worldlab table loops --model teacher_forcing=runs/long/worlds/teacher_forcing \
        --model self_rollout=runs/long/worlds/self_rollout --reference teacher_forcing \
        --engine procedural --block procedural --walks 16 --frames 1000 --seed 1400000

`--explore N` (default 288) gives every world the engine's first N frames (the player has
walked the loops' first lap before the world plays on): the world has seen the places the
late frames return to, so memory can be scored against them. Without it, a world's first
lap is its own invention, and a late frame that recalls it perfectly is still scored
against the engine.

The table holds one block, `engines.<--block>`; each world's scores are cached under
--cache, so a rerun measures only what is missing.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..paths import relative
from ..pretrained import load_world
from ..threads import use_threads
from ..viz import COLORS, frame_grid
from .long import LOOP_GAP, LOOP_OVERLAP, generate_walk, given_frames, long_horizon
from .memory_bars import Bar, bar_rows
from .protocols import whole_walks
from .report import print_table
from .stats import bootstrap, paired_seed_rows, seed_groups
from .table_io import (best_row, cache_key, cached, paired_models, seed_row, with_engines_of,
                       write_scores, write_strip, write_table)

OPTS = {"doom": {"monsters": "invulnerable"}, "procedural": {}}
POLICY = "loops"
# a method's late-window scores in the table (means over its seeds)
METHOD_KEYS = ("ssim_late", "sharpness_ratio_vs_engine_late", "sharpness_ratio_vs_ae_late",
               "motion_ratio_vs_engine_late", "colour_distance_late", "realism_distance_late",
               "psnr_early")
# what every world's walks share (the same frames): read from the reference's first seed
REFERENCE_KEYS = ("psnr_repeat_late", "loop_closure_psnr_repeat_late", "psnr_warp_late",
                  "loop_closure_psnr_warp_late", "psnr_ae_late", "loop_closure_psnr_ae_late",
                  "realism_distance_ae_late", "realism_distance_repeat_late",
                  "realism_distance_warp_late", "realism_note", "loop_closure_frames")


LOOP_BARS = {  # keys of a block's "bars" (`loop_bar_values`): the long-horizon issue's
    "best_minus_reference_late_db": Bar("late PSNR: best - teacher_forcing, paired mean (dB)",
                                        ">=", 1.0),
    "best_minus_reference_late_lo_db": Bar("late PSNR: best - teacher_forcing, interval's "
                                           "lower end (dB)", ">", 0.0),
    "best_loop_closure_minus_repeat_db": Bar("loop-closure PSNR: best - repeat-last (dB)",
                                             ">=", 2.0),
    "best_sharpness_ratio_vs_ae_late": Bar("late sharpness: best / autoencoder", ">=", 0.8),
    "best_motion_ratio_vs_engine_late": Bar("late motion: best / engine", ">=", 0.8),
}


def loop_bar_values(b: dict, best: str, reference: str) -> dict:
    """The values LOOP_BARS judge, from a loops block and its best method; a value the
    block lacks (no loop-closure frames, the reference itself as best) is left out."""
    m, out = b["methods"][best], {}
    if best != reference:
        paired = m[f"paired_vs_{reference}"]
        out |= {"best_minus_reference_late_db": paired["mean"],
                "best_minus_reference_late_lo_db": paired["lo"]}
    if m["loop_closure_psnr_late"] is not None and \
            b["loop_closure_psnr_repeat_late"] is not None:
        out["best_loop_closure_minus_repeat_db"] = (m["loop_closure_psnr_late"]
                                                    - b["loop_closure_psnr_repeat_late"])
    out |= {"best_sharpness_ratio_vs_ae_late": m["sharpness_ratio_vs_ae_late"],
            "best_motion_ratio_vs_engine_late": m["motion_ratio_vs_engine_late"]}
    return out


def loop_walks(n: int, frames: int, size: int, engine: str, maps: tuple, seed: int,
               **opts) -> tuple[list, dict]:
    """`n` whole walks of the loops player from random starts (`protocols.whole_walks`: a
    walk that ends early is left out and counted, and the next seed tried)."""
    return whole_walks(engine, n, frames, size, seed, POLICY, start="random",
                       maps=maps or None, **opts)


def _mean(values) -> float | None:
    kept = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(kept)) if kept else None


def _mean_curves(curves: list[dict]) -> dict:
    """Each curve (10-frame means along the walk) averaged over a method's seeds; a curve
    only some seeds have (the drift-free stream, the reference's first seed's) is left out."""
    return {k: curves[0][k] if k == "frame" else
            np.round(np.mean([c[k] for c in curves], axis=0), 3).tolist()
            for k in curves[0] if all(k in c for c in curves)}


def _curve_interval(scores: list[dict]) -> dict:
    """`psnr_open_loop_lo` and `_hi`: each curve point's 95% bootstrap interval over walks,
    every walk's curve first averaged over the method's seeds."""
    if any("curves_per_walk" not in s for s in scores):
        return {}
    per_walk = np.mean([s["curves_per_walk"]["psnr_open_loop"] for s in scores], axis=0)
    cis = [bootstrap(point) for point in per_walk.T]  # per_walk (walks, points)
    return {"psnr_open_loop_lo": [round(c["lo"], 3) for c in cis],
            "psnr_open_loop_hi": [round(c["hi"], 3) for c in cis]}


def block(scores: dict, reference: str, walks: dict) -> dict:
    """The table's block of one engine: methods pooled over seeds and paired with
    `reference` on the late PSNR, the references, the walks' description."""
    groups = seed_groups(scores)
    late = paired_seed_rows({n: s["psnr_late_per_walk"] for n, s in scores.items()},
                            reference)
    loops = paired_seed_rows({n: s["loop_closure_psnr_late_per_walk"]
                              for n, s in scores.items()}, reference)
    methods = {}
    for base, names in groups.items():
        methods[base] = {
            **seed_row(late[base], "psnr_late"),
            "loop_closure_psnr_late": loops[base]["mean"],
            **{k: _mean(scores[n][k] for n in names) for k in METHOD_KEYS},
            "sampling_steps": scores[names[0]]["sampling_steps"],
            "curves": {**_mean_curves([scores[n]["curves"] for n in names]),
                       **_curve_interval([scores[n] for n in names])}}
        if base != reference:
            methods[base][f"loop_closure_paired_vs_{reference}"] = \
                loops[base][f"paired_vs_{reference}"]
    first = scores[reference_row(scores, reference)]
    return {**walks, "seeds": max(len(g) for g in groups.values()), "methods": methods,
            **{k: first.get(k) for k in REFERENCE_KEYS},
            "psnr_drift_free_late": first["psnr_drift_free_late"],
            "drift_free_is": f"{reference} fed the engine's chunks all along: a next-chunk "
                             f"score, not a ceiling of open loop"}


def curves_figure(b: dict, title: str) -> go.Figure:
    """PSNR along a block's walks (10-frame means, each method's seeds averaged walk by walk)
    with its 95% interval over walks where the block has one, beside repeat-last and the
    autoencoder: notebook 05's figure of each engine."""
    fig = go.Figure(layout=dict(title=title, xaxis_title="frame", yaxis_title="PSNR (dB)",
                                height=420))
    for k, (name, m) in enumerate(b["methods"].items()):
        c, colour = m["curves"], COLORS[k % len(COLORS)]
        if "psnr_open_loop_lo" in c:
            fig.add_scatter(x=c["frame"] + c["frame"][::-1],
                            y=c["psnr_open_loop_hi"] + c["psnr_open_loop_lo"][::-1],
                            fill="toself", line_width=0, fillcolor=colour, opacity=0.2,
                            showlegend=False, hoverinfo="skip")
        fig.add_scatter(x=c["frame"], y=c["psnr_open_loop"], name=name, line_color=colour)
    c = next(iter(b["methods"].values()))["curves"]
    for key, label in (("psnr_autoencoder", "autoencoder"), ("psnr_repeat", "repeat-last")):
        fig.add_scatter(x=c["frame"], y=c[key], name=label, line_color="grey", line_dash="dot")
    return fig


def reference_row(names, reference: str) -> str:
    """The row the table reads the walks' shared scores and the drift-free stream from: the
    one named `reference` (its first seed), else the first of its seeds among `names`."""
    return reference if reference in names else seed_groups(names)[reference][0]


def _score(world, walks, drift_free: bool, engine: str, explore: int) -> dict:
    return {**long_horizon(world, walks, drift_free=drift_free, engine=engine,
                           explore=explore),
            "sampling_steps": world.config.sample.steps}


def cli(args) -> int:
    models = paired_models(args)
    use_threads(args.threads)
    worlds = {n: load_world(p, device="cpu") for n, p in models.items()}
    sizes = {w.size for w in worlds.values()}
    if len(sizes) != 1:
        raise ValueError(f"the worlds must share a frame size (the same walks), got "
                         f"{ {n: w.size for n, w in worlds.items()} }")
    maps = tuple(m for m in args.maps.split(",") if m) if args.engine == "doom" else ()
    opts = OPTS[args.engine]
    walks, info = loop_walks(args.walks, args.frames, sizes.pop(), args.engine, maps,
                             args.seed, **opts)
    key = (args.engine, maps, opts, POLICY, args.walks, args.frames, args.seed, args.explore)
    # the drift-free stream (as many chunks again as the open loop) only where the table
    # reads it (a --score-only job: the table made later reads the row named --reference)
    drift_row = args.reference if args.score_only else reference_row(models, args.reference)
    scores = {n: cached(f"{args.cache}/{n}-{cache_key(models[n], *key)}.json",
                        lambda w=w, n=n: _score(w, walks, n == drift_row,
                                                args.engine, args.explore))
              for n, w in worlds.items()}
    if args.score_only:
        write_scores(args.out, scores, models)
        return 0
    described = {"walks": len(walks), "frames_per_walk": args.frames, "policy": POLICY,
                 "engine": args.engine, "maps": list(maps), "engine_options": opts,
                 "start": "random", "first_seed": args.seed,
                 "given_frames": scores[next(iter(scores))]["given_frames"],
                 "walk_seeds_tried": info["seeds_tried"], "ended_early": info["ended_early"],
                 "late_window": scores[next(iter(scores))]["window_late"],
                 "loop_closure": {"min_gap_frames": LOOP_GAP, "min_overlap": LOOP_OVERLAP}}
    given = (f"the engine's first {args.explore} frames (the loops' first lap) given"
             if args.explore else "the first chunk given")
    table = {"what": f"the long-horizon protocol on loop walks: open loop after {given}; "
                     "late = the last 100 frames; loop closure = late frames whose view a "
                     "frame more than 100 frames earlier covers by half",
             "reference": args.reference, "budget": args.budget, "threads": args.threads,
             "models": {n: relative(p) for n, p in models.items()},
             "engines": {args.block: block(scores, args.reference, described)}}
    b = table["engines"][args.block]
    b["best"] = best_row(b, args.reference, args.best_from, args.block, "methods", "psnr_late")
    b["bars"] = loop_bar_values(b, b["best"]["name"], args.reference)
    if args.strip:
        b["strip"] = _strip(worlds, [args.reference, b["best"]["name"]], walks[0], args.out,
                            args.explore)
    write_table(args.out, with_engines_of(table, args.beside) if args.beside else table)
    print(f"{args.block} ({b['walks']} walks of {args.frames} frames, "
          f"{b['loop_closure_frames']} loop-closure frames in the late window): "
          + ", ".join(f"{n} {r['psnr_late']:.2f}" for n, r in b["methods"].items())
          + f"; repeat {b['psnr_repeat_late']:.2f}, warp {b['psnr_warp_late']:.2f}, "
            f"autoencoder {b['psnr_ae_late']:.2f}")
    print_table(bar_rows(b["bars"], LOOP_BARS),
                f"the long-horizon bars (best: {b['best']['name']}, chosen on "
                f"{b['best']['chosen_on']})")
    return 0


def _strip(worlds: dict, names: list[str], walk, out, explore: int) -> dict:
    """Frames 100 and about 500 of the open loop and the walk's last, of the first walk as
    scored (`generate_walk`, its noise), for the worlds `names` (first seeds), as a PNG
    beside the table: rows engine | each world."""
    names = list(dict.fromkeys(names))
    streams = {n: generate_walk(worlds[n], walk, drift_free=False, explore=explore)
               for n in names}
    first = streams[names[0]]
    T = len(first["engine"])
    given = given_frames(explore, worlds[names[0]].chunk_frames, T)
    at = sorted({min(given + 100, T), min(given + 500, T), T})  # 1-based frames
    rows = [first["engine"], *(streams[n]["open_loop"] for n in names)]
    image = frame_grid(np.concatenate([r[[a - 1 for a in at]] for r in rows]), cols=len(at),
                       pad=2)
    return {"file": write_strip(out, image).name, "walk_seed": walk.meta.get("seed"),
            "rows": ["engine", *names], "frames": at}
