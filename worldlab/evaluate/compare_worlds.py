"""`table worlds`: old world against new, on the engine's ground truth (a JSON and a strip
beside it; the shipped worlds.json is `table defaults`'); with --autoencoders, the autoencoder
protocol alone.

    python -m worldlab table worlds                                  # the shipped pair
    python -m worldlab table worlds --new runs/w2/package --parts world
    python -m worldlab table worlds --autoencoders a=runs/a/model,b=runs/b/model \
        --out runs/tables/autoencoders.json      # the autoencoder protocol alone
        [--ae-strip a_b.png]                      # and a PNG of their reconstructions
    (an autoencoder `resample:F` is `Resampling(F)`: averaging F x F pixels, then bicubic;
    rows named BASE_seedN beside a row BASE, its seed 0, are also summarised over seeds)

For each world (`--old`, `--new`) it measures, on held-out seeds (HELDOUT_SEED and up):
- coverage: the share of MAP01's reachable floor its training store visited (`--old-data`,
  `--new-data`; the stores are recorded by the commands in data/README.md);
- autoencoder: PSNR, SSIM, sharpness ratio and colour distance on 16 episodes from random
  starts over the training maps MAP01-03, and on 16 from the held-out map MAP04;
- world: the quick suite on 8 episodes from random starts over MAP01 (next chunk beside
  repeat-last, warp-last and the autoencoder, the 32-frame rollout against repeat-last per
  step, mirrored controls) and the mean of a
  128-frame open loop rollout against repeat-last's.
Monsters are on with the player invulnerable, as in the new training data. Each part is
cached as JSON under --cache, so a rerun only measures what is missing. The strip (engine |
old | new [| --strip-also worlds] at steps 8, 32, 64 of one held-out random-start walk) is
written as a PNG beside the table's JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..atomic import atomic_write
from ..engines import make_engine
from ..episodes import EpisodeStore, level_coverage
from ..loading import load_module, read_model_config
from ..model.autoencoder import Resampling, VideoAutoencoder
from ..paths import ROOT, relative
from ..pretrained import load_world
from ..threads import use_threads
from ..viz import to_png_bytes
from .protocols import HELDOUT_SEED, autoencoder_scores, heldout_episodes, quick_suite
from .stats import combine_seeds, seed_groups
from .strip import reconstruction_strip, rollout_strip
from .table_io import beside, cached, write_table

TRAIN_MAPS, HELDOUT_MAP = ("MAP01", "MAP02", "MAP03"), ("MAP04",)
OPTS = {"monsters": "invulnerable"}
# every trivial baseline sits beside the world: repeat-last, warp-last (the last frame moved
# into the next poses with the engine's depth) and the world's own autoencoder
WORLD_KEYS = ("next_chunk_psnr", "baseline_repeat_psnr", "baseline_warp_psnr",
              "autoencoder_psnr", "rollout_psnr", "baseline_repeat_rollout_psnr")
AE_KEYS = ("psnr", "ssim", "sharpness_ratio", "colour_distance")
AE_BARS = {"psnr": 30.0, "sharpness_ratio": 0.7}  # the world issue's, on the training maps


def slot(cache: Path, part: str, source) -> Path:
    """Where `part` of `source` (a checkpoint, autoencoder or store directory) is cached: one
    file per directory, so a world's autoencoder and the same one scored alone share it."""
    return cache / part / (str(Path(source)).strip("/").replace("/", "__") + ".json")


RESAMPLE = "resample:"  # --autoencoders name=resample:F, the unlearned reference at Fx


def resample_factor(path) -> int | None:
    """F of the autoencoder `resample:F` (`Resampling(F)`); None for a directory."""
    path = str(path)
    return int(path[len(RESAMPLE):]) if path.startswith(RESAMPLE) else None


def load_autoencoder(path):
    """The autoencoder directory `path`, or `Resampling(F)` for `resample:F`."""
    if (factor := resample_factor(path)) is not None:
        return Resampling(factor)
    return load_module(VideoAutoencoder, ROOT / path).float().eval()


def autoencoder_row(cache: Path, path) -> dict:
    """The autoencoder protocol on the autoencoder directory `path` (or `resample:F`), cached."""
    return cached(slot(cache, "autoencoder", path),
                  lambda: autoencoder_part(load_autoencoder(path)))


STRIP_FRAMES = (8, 40)  # of one held-out random-start walk on the training maps, then MAP04


def strip_frames() -> np.ndarray:
    """uint8 (4, 64, 64, 3): the autoencoder strip's columns (STRIP_FRAMES of one held-out
    walk over the training maps, then of one on the held-out map)."""
    walks = [heldout_episodes("doom", 1, 48, 64, start="random", maps=maps,
                              seed=HELDOUT_SEED + 100, **OPTS)[0]
             for maps in (TRAIN_MAPS, HELDOUT_MAP)]
    return np.concatenate([ep.rgb[list(STRIP_FRAMES)] for ep in walks])


def coverage_of(store_dir: str) -> dict:
    store = EpisodeStore(store_dir)
    doom = make_engine("doom", size=64)
    try:
        report = level_coverage(store, doom)["MAP01"]
    finally:
        doom.close()
    on_map01 = sum(e.get("map", "MAP01") == "MAP01" for e in store.index.values())
    return {"share_of_reachable_area": round(report["share_of_reachable_area"], 4),
            "store": relative(store_dir), "episodes_on_MAP01": on_map01}


def autoencoder_part(ae, size: int = 64) -> dict:
    """PSNR, SSIM, sharpness, colour of `ae` on random starts over the training maps and on
    the held-out map."""
    def scores(maps):
        eps = heldout_episodes("doom", 16, 64, size, start="random", maps=maps, **OPTS)
        return {k: float(v) for k, v in autoencoder_scores(ae, eps).items()}
    train, held = scores(TRAIN_MAPS), scores(HELDOUT_MAP)
    return {**{k: train[k] for k in AE_KEYS}, "heldout_map": {k: held[k] for k in AE_KEYS}}


def world_part(world) -> dict:
    f = world.chunk_frames
    eps32 = heldout_episodes("doom", 8, 2 * f + 32, world.size, start="random",
                             maps=("MAP01",), **OPTS)
    q = quick_suite(world, eps32, horizon=32)
    eps128 = heldout_episodes("doom", 8, 2 * f + 128, world.size, start="random",
                              maps=("MAP01",), **OPTS)
    long = quick_suite(world, eps128, horizon=128)
    return {**{k: q[k] for k in WORLD_KEYS}, "mirrored_drop_db": q["bars"]["mirrored_drop_db"],
            "rollout_beats_repeat_every_step": q["bars"]["rollout_beats_repeat_every_step"],
            "rollout128_psnr_mean": long["rollout_psnr_mean"],
            "rollout128_repeat_psnr_mean": float(np.mean(long["baseline_repeat_rollout_psnr"])),
            "rollout128_psnr": long["rollout_psnr"],
            "rollout128_repeat_psnr": long["baseline_repeat_rollout_psnr"]}


def seed_summary(rows: dict) -> dict:
    """Rows trained again at other seeds (BASE, BASE_seed1, ...) pooled by
    `stats.combine_seeds` on the training maps and on the held-out map, with AE_BARS
    checked for the mean and for each seed."""
    train = combine_seeds(rows, AE_KEYS)
    held = combine_seeds({n: r["heldout_map"] for n, r in rows.items()}, AE_KEYS)
    groups = seed_groups(rows)

    def clears(scores) -> bool:
        return all(scores[k] >= bar for k, bar in AE_BARS.items())

    return {base: {**stats, "heldout_map": held[base],
                   "mean_clears_bars": clears({k: stats[k]["mean"] for k in AE_BARS}),
                   "seeds_clearing_bars": sum(clears(rows[n]) for n in groups[base])}
            for base, stats in train.items()}


def compare_autoencoders(spec: str, cache: Path, out: Path, strip: str | None = None,
                         strip_rows: str | None = None) -> int:
    """`--autoencoders name=DIR,...`: the autoencoder protocol above on each, one table; with
    `strip` (a file name beside `out`), a PNG of what the `strip_rows` (names, default all)
    keep of the same frames."""
    paths = dict(part.partition("=")[::2] for part in spec.split(","))
    names = strip_rows.split(",") if strip_rows else list(paths)
    if unknown := [n for n in names if n not in paths]:
        raise ValueError(f"--ae-strip-rows names {unknown}, not in --autoencoders {list(paths)}")
    rows = {}
    for name, path in paths.items():
        downsample = resample_factor(path) or 2 ** (
            len(read_model_config(ROOT / path)["block_out_channels"]) - 1)
        rows[name] = {"autoencoder": relative(path), "downsample": downsample,
                      **autoencoder_row(cache, path)}
        print(name, json.dumps(rows[name]))
    table = {"rows": rows}
    if seeds := seed_summary(rows):
        table["seeds"] = {"bars": AE_BARS, **seeds}
        print("seeds", json.dumps(seeds))
    if strip:
        png = to_png_bytes(reconstruction_strip(
            {n: load_autoencoder(paths[n]) for n in names}, strip_frames(), scale=3))
        atomic_write(beside(out, strip), lambda fh: fh.write(png))
        table["strip"] = {"file": relative(beside(out, strip)), "rows": ["engine", *names],
                          "columns": (f"frames {STRIP_FRAMES} of held-out walks from random "
                                      f"starts over {'-'.join(TRAIN_MAPS)}, then on "
                                      f"{HELDOUT_MAP[0]}; 3x magnified")}
    write_table(out, table)
    return 0


def _world_row(name: str, path: str, world, data: str, parts: set, cache: Path) -> dict:
    """The parts of one world (`path`, trained on the store `data`) that `parts` names."""
    row = {"checkpoint": relative(path)}
    if "coverage" in parts:
        row["coverage"] = cached(slot(cache, "coverage", data), lambda: coverage_of(data))
    if "autoencoder" in parts:
        row["autoencoder"] = autoencoder_row(cache, Path(path) / "autoencoder")
    if "world" in parts:
        row["world"] = cached(slot(cache, "world", path), lambda: world_part(world))
    print(name, json.dumps({k: v for k, v in row.items() if k != "world"}, indent=1))
    return row


def cli(args) -> int:
    """`table worlds`: the table of --old against --new (or of --autoencoders) to --out."""
    use_threads(args.threads)
    cache, out = Path(args.cache), Path(args.out)
    if args.autoencoders:
        return compare_autoencoders(args.autoencoders, cache, out, args.ae_strip,
                                    args.ae_strip_rows)
    parts, which = set(args.parts.split(",")), args.which.split(",")
    worlds = {name: load_world(ROOT / getattr(args, name), device="cpu")
              for name in ("old", "new") if name in which}
    data = {"old": args.old_data, "new": args.new_data}
    scores = {name: _world_row(name, getattr(args, name), world, data[name], parts, cache)
              for name, world in worlds.items()}
    if len(worlds) < 2:
        return 0
    extra = dict(part.partition("=")[::2] for part in (args.strip_also or "").split(",") if part)
    strip = beside(out, args.strip or f"{out.stem}_strip.png")
    if "strip" in parts:
        ep = heldout_episodes("doom", 1, 4 + 64, 64, start="random", maps=("MAP01",),
                              seed=HELDOUT_SEED + 100, **OPTS)[0]
        rows = {**worlds, **{n: load_world(ROOT / d, device="cpu") for n, d in extra.items()}}
        png = to_png_bytes(rollout_strip(rows, ep, at=(8, 32, 64)))
        atomic_write(strip, lambda fh: fh.write(png))
    write_table(out, {
        "what": f"{args.what}, scored against the engine on held-out seeds (see "
                "worldlab/evaluate/compare_worlds.py for the protocol)",
        "strip": {"file": relative(strip), "rows": ["engine", "old", "new", *extra],
                  "columns": "steps 8, 32, 64 after the first (true) chunk"},
        **scores})
    return 0
