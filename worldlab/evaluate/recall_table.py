"""`table recall`: worlds (several training seeds each, rows "x", "x_seed1", ...) scored by
the recall protocol (`recall.py`) on the same held-out revisit walks, every variant paired
walk by walk with `--reference` of the same seed, beside the oracle, copy, repeat-last,
warp-last and the autoencoder.

    python -m worldlab table recall --model none=runs/geometry/worlds/none \
        --model cache3d_own=runs/geometry/worlds/cache3d_own --reference none \
        --engine doom --maps MAP04 --block doom_heldout_map --walks 32 --seed 1200000

The table holds one block, `engines.<--block>`; each world's scores and the references are
cached under --cache, so a rerun measures only what is missing. With --run NAME=DIR (a
training run, repeated), the block also holds each run's memory gates over its training,
`gates.<NAME>.<gate>` = [[step, norm], ...] (`train.tracked.gate_curves`).
"""

from __future__ import annotations

import numpy as np

from ..paths import relative
from ..pretrained import load_world
from ..threads import use_threads
from ..train.tracked import gate_curves
from .memory_bars import RECALL_BARS, bar_rows, recall_bar_values
from .recall import (MAX_WINDOW_COVER, recall_strip, recall_walks, reference_recall,
                     timed_worlds, world_recall)
from .revisit import MIN_GAP, MIN_OVERLAP
from .report import print_table
from .stats import bootstrap, paired_seed_rows, seed_groups
from .table_io import (best_row, cache_key, cached, paired_models, parse_models, seed_row,
                       with_engines_of, write_scores, write_strip, write_table)

OPTS = {"doom": {"monsters": "invulnerable"}, "procedural": {}}  # and procedural's --walls


def walk_geometry(worlds: dict) -> tuple[int, int]:
    """(chunk frames, window frames) every world shares: the walks' recall frames follow
    from the window."""
    shapes = {n: (w.chunk_frames, w.config.model.window_chunks * w.chunk_frames)
              for n, w in worlds.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"the worlds must share chunk and window sizes (recall frames are "
                         f"defined by the window), got {shapes}")
    return next(iter(shapes.values()))


def describe(walks, pairs, info: dict, engine: str, maps, opts: dict, seed: int,
             window: int) -> dict:
    """What a block says of its walks (`recall.recall_walks`' walks, recall frames and
    info): how many, from which seeds, of which engine, and the recall rule's thresholds."""
    return {"walks": len(walks), "recall_frames": sum(map(len, pairs)),
            "walk_seeds_tried": info["seeds_tried"],
            "walks_without_recall_frames": len(info["left_out"]),
            "engine": engine, "maps": list(maps), "engine_options": opts,
            "frames_per_walk": len(walks[0]), "first_seed": seed, "window_frames": window,
            "min_gap": MIN_GAP, "min_overlap": MIN_OVERLAP,
            "max_window_cover": MAX_WINDOW_COVER}


def print_block(b: dict, reference: str, title: str = "recall frames") -> None:
    """A block's variants (paired with `reference`) and references, as aligned columns,
    under `title` and the block's walks and recall frames."""
    rows = [{"world": n, "recall dB": v["recall_psnr"],
             f"minus {reference}": v.get(f"paired_vs_{reference}", {}).get("mean", ""),
             "seeds": v["seeds"], "tokens/frame": v["memory_tokens_per_frame"],
             "ms/chunk": v["ms_per_chunk"]} for n, v in b["variants"].items()]
    rows += [{"world": n, "recall dB": v["recall_psnr"]} for n, v in b["references"].items()]
    print_table(rows, f"{title} ({b['walks']} walks, {b['recall_frames']} recall frames)")


def block(scores: dict, references: dict, reference: str, walks: dict,
          timing: dict | None = None) -> dict:
    """The table's block of one engine: variants pooled over seeds and paired with
    `reference`, the references with intervals, the walks' description. `timing` ({variant:
    ms per chunk}, `recall.timed_worlds`) gives each variant's `ms_per_chunk`; without it,
    the median of its seeds' scoring jobs."""
    rows = paired_seed_rows({n: s["recall_psnr_per_walk"] for n, s in scores.items()},
                            reference)
    variants = {}
    for base, row in rows.items():
        names = list(row["per_seed"])
        variants[base] = {
            **seed_row(row, "recall_psnr"),
            "memory_tokens_per_frame": scores[names[0]]["memory_tokens_per_frame"],
            "ms_per_chunk": timing[base] if timing else
            float(np.median([scores[n]["ms_per_chunk"] for n in names])),
            "sampling_steps": scores[names[0]]["sampling_steps"]}
    return {**walks, "seeds": max(len(g) for g in seed_groups(scores).values()),
            "variants": variants,
            "references": {k: seed_row(bootstrap(v), "recall_psnr")
                           for k, v in references.items()}}


def _timing(worlds: dict, models: dict, walks, pairs, path: str) -> dict[str, float]:
    """{variant: ms per chunk} of each variant's first seed, timed in turns on the first
    walks (`recall.timed_worlds`), cached at `path`."""
    firsts = {base: names[0] for base, names in seed_groups(models).items()}
    timed = cached(path, lambda: timed_worlds({n: worlds[n] for n in firsts.values()},
                                              walks, pairs))
    return {base: timed[n] for base, n in firsts.items()}


def _strip(worlds: dict, names: list[str], walk, found, out) -> dict:
    """The moment of return on one walk (`recall.recall_strip`) of the worlds `names`
    (first seeds), as a PNG beside the table (shipped beside it too): what it shows."""
    names = list(dict.fromkeys(names))
    image, rows = recall_strip({n: worlds[n] for n in names}, walk, found)
    return {"file": write_strip(out, image).name, "walk_seed": walk.meta.get("seed"),
            "columns": ["engine", *names, "oracle"], "rows_j_and_outbound": rows}


def cli(args) -> int:
    models = paired_models(args)
    # the memory gates over each --run's training (WorldModel.memory_gates), read first: a
    # bad --run is named before anything is measured
    gates = {n: gate_curves(p) for n, p in parse_models(args.run, "--run").items()}
    use_threads(args.threads)
    worlds = {n: load_world(p, device="cpu") for n, p in models.items()}
    f, window = walk_geometry(worlds)
    maps = tuple(m for m in args.maps.split(",") if m) if args.engine == "doom" else ()
    if args.walls and args.engine != "procedural":
        raise ValueError(f"--walls is the procedural engine's option, got --engine "
                         f"{args.engine}")
    opts = {**OPTS[args.engine], **({"walls": args.walls} if args.walls else {})}
    walks, pairs, info = recall_walks(args.walks, args.frames, window, f, args.engine, maps,
                                      args.seed, **opts)
    cache = args.cache
    key = (args.engine, maps, opts, args.walks, args.frames, args.seed, window)
    scores = {n: cached(f"{cache}/{n}-{cache_key(models[n], *key)}.json",
                        lambda w=w: world_recall(w, walks, pairs))
              for n, w in worlds.items()}
    if args.score_only:  # the references come with the reference's own first seed
        first = seed_groups(models).get(args.reference, [None])[0]
        if first in worlds:
            cached(f"{cache}/references-{cache_key(models[first], *key)}.json",
                   lambda: reference_recall(worlds[first], walks, pairs))
        write_scores(args.out, scores, models)
        return 0
    name = next(iter(seed_groups(models)[args.reference]))
    references = cached(f"{cache}/references-{cache_key(models[name], *key)}.json",
                        lambda: reference_recall(worlds[name], walks, pairs))
    timing = _timing(worlds, models, walks[:args.time_walks], pairs[:args.time_walks],
                     f"{cache}/timing-{cache_key(*models.values(), *key, args.time_walks, 'cpu')}"
                     ".json")
    described = {**describe(walks, pairs, info, args.engine, maps, opts, args.seed, window),
                 "timed_walks": min(args.time_walks, len(walks))}
    table = {"what": "the recall protocol: outbound chunks teacher forced, return chunks "
                     "generated; scored on return frames an outbound frame far back covers "
                     "by half and the window's frames by less than a fifth",
             "reference": args.reference, "budget": args.budget, "threads": args.threads,
             "models": {n: relative(p) for n, p in models.items()},
             "engines": {args.block: block(scores, references, args.reference, described,
                                           timing)}}
    b = table["engines"][args.block]
    b["best"] = best_row(b, args.reference, args.best_from, args.block, "variants",
                         "recall_psnr")
    b["bars"] = recall_bar_values(b["variants"], b["best"]["name"], args.reference)
    if gates:
        b["gates"] = gates
    if args.strip:
        k = max(range(len(walks)), key=lambda k: len(pairs[k]))  # the most recall frames
        b["strip"] = _strip(worlds, [args.reference, b["best"]["name"]], walks[k], pairs[k],
                            args.out)
    write_table(args.out, with_engines_of(table, args.beside) if args.beside else table)
    print_block(b, args.reference)
    print_table(bar_rows(b["bars"], RECALL_BARS),
                f"the recall bars (best: {b['best']['name']}, chosen on {b['best']['chosen_on']})")
    return 0
