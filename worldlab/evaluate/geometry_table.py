"""`table geometry`: does a world beat warp-last on the next chunk when it is given the
geometry warp-last uses? Worlds (several training seeds each, rows "x", "x_seed1", ...)
scored on the same held-out walks with the next-chunk protocol (`protocols.next_chunk`:
the context each world was trained with, its own sampling steps), beside repeat-last,
warp-last and the autoencoder; every variant paired walk by walk with the `--reference`
variant of the same seed, and with warp-last.

    python -m worldlab table geometry --model none=runs/geometry/worlds/none \
        --model cache3d_own=runs/geometry/worlds/cache3d_own --reference none \
        --walks 32 --seed 1000000

Two map sets: random starts over the training maps (MAP01-03, seed `--seed`) and the held-out
map MAP04 (seed `--seed` + 100,000). Monsters are on with the player invulnerable, as in the
training data. Each world's scores are cached under --cache, so a rerun only measures what
is missing. Shape legend: w walks.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..paths import relative
from ..pretrained import load_world
from ..threads import use_threads
from .protocols import heldout_episodes, next_chunk
from .stats import bootstrap, paired, paired_seed_rows
from .table_io import cache_key, cached, paired_models, seed_row, write_table

MAP_SETS = {"training_maps": ("MAP01", "MAP02", "MAP03"), "heldout_map": ("MAP04",)}
HELDOUT_MAP_OFFSET = 100_000  # the held-out map's walks start this far above --seed
OPTS = {"monsters": "invulnerable"}
BASELINES = {"repeat_last": "baseline_repeat_psnr", "warp_last": "baseline_warp_psnr",
             "autoencoder": "autoencoder_psnr"}


def _scores(path: Path, walks: dict[str, list], starts: int) -> dict:
    """{map set: next_chunk's output} of the world at `path`."""
    world = load_world(path, device="cpu")
    t0 = time.perf_counter()
    scores = {k: next_chunk(world, eps, starts, seed=0) for k, eps in walks.items()}
    return {**scores, "seconds": time.perf_counter() - t0,
            "sampling_steps": world.config.sample.steps}


def _block(scores: dict[str, dict], key: str, reference: str) -> dict:
    """One map set's rows: each variant pooled over its seeds, paired with `reference` (same
    seed) and with warp-last, and the baselines (read from the first world: every world is
    scored at the same start points when their windows agree)."""
    first = next(iter(scores.values()))[key]
    per_walk = {n: s[key]["next_chunk_psnr_per_episode"] for n, s in scores.items()}
    if len({len(v) for v in per_walk.values()}) != 1:
        raise ValueError(f"the worlds scored different walks on {key}: "
                         f"{ {n: len(v) for n, v in per_walk.items()} }")
    warp = first["baseline_warp_psnr_per_episode"]
    rows = {}
    for base, row in paired_seed_rows(per_walk, reference).items():
        seeds_mean = np.mean([per_walk[n] for n in row["per_seed"]], 0)
        rows[base] = {**seed_row(row, "next_chunk_psnr"), "vs_warp_last": paired(seeds_mean,
                                                                                 warp)}
    baselines = {name: bootstrap(first[f"{k}_per_episode"]) for name, k in BASELINES.items()}
    return {"walks": len(warp), "short_walks": first["next_chunk_short_episodes"],
            "context_frames": first["next_chunk_context_frames"],
            "samples_per_world": first["next_chunk_samples"],
            "variants": rows, "baselines": baselines}


def paired_rows(table: dict) -> dict:
    """{label: {"mean", "lo", "hi"}}: each world's paired differences in a geometry table
    (against the reference of its seed, and against warp-last), per map set, for
    `viz.interval_figure`."""
    rows, ref = {}, table["reference"]
    for block in MAP_SETS:
        for name, v in table[block]["variants"].items():
            if f"paired_vs_{ref}" in v:
                rows[f"{block}: {name} - {ref}"] = v[f"paired_vs_{ref}"]
            rows[f"{block}: {name} - warp-last"] = v["vs_warp_last"]
    return rows


def cli(args) -> int:
    models = paired_models(args)
    use_threads(args.threads)
    walks = {name: heldout_episodes("doom", args.walks, args.frames, 64, start="random",
                                    maps=maps, seed=args.seed + k * HELDOUT_MAP_OFFSET,
                                    **OPTS)
             for k, (name, maps) in enumerate(MAP_SETS.items())}
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    key = (args.walks, args.frames, args.starts, args.seed)
    scores = {n: cached(cache / f"{n}-{cache_key(p, *key)}.json",
                        lambda p=p: _scores(p, walks, args.starts))
              for n, p in models.items()}
    table = {"what": "next chunk from the context each world was trained with, beside "
                     "repeat-last, warp-last (the last true frame moved into the next poses "
                     "with the engine's depth) and the autoencoder; each variant paired walk "
                     "by walk with the reference of the same training seed",
             "reference": args.reference, "budget": args.budget, "threads": args.threads,
             "walks_seed": args.seed, "frames_per_walk": args.frames,
             "starts_per_walk": args.starts,
             "map_sets": {k: list(v) for k, v in MAP_SETS.items()},
             "models": {n: relative(p) for n, p in models.items()},
             "sampling_steps": {n: s["sampling_steps"] for n, s in scores.items()},
             "seconds": {n: round(s["seconds"], 1) for n, s in scores.items()},
             **{k: _block(scores, k, args.reference) for k in MAP_SETS}}
    write_table(args.out, table)
    for k in MAP_SETS:
        b = table[k]
        print(f"{k} ({b['walks']} walks): " + ", ".join(
            f"{n} {r['next_chunk_psnr']:.2f}" for n, r in b["variants"].items())
            + f"; warp-last {b['baselines']['warp_last']['mean']:.2f}, repeat-last "
              f"{b['baselines']['repeat_last']['mean']:.2f}")
    return 0
