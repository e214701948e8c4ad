"""`table defaults`: each default world (doom64, proc64) against the default it replaces, on
the same fresh held-out walks, every trivial baseline beside them, with the world issue's
bars (`data/results/worlds.json`).

    python -m worldlab table defaults --world doom64=data/checkpoints/doom64 \
        --old doom64=runs/worlds/old/doom64 --world proc64=data/checkpoints/proc64 \
        --old proc64=runs/worlds/old/proc64 --walks 32 --out runs/tables/worlds.json

Per world, on `--walks` walks from random starts (DOOM: over the training maps MAP01-03, the
player invulnerable; procedural: worlds of seeds no recording trained on), each sampled as
it ships (its own steps and decoder):
- next chunk from the context it was trained with, beside repeat-last, warp-last, the
  gap-free view warp with the engine's depth (`baselines`: geometry alone, a reference
  beside the bars' warp-last) and its autoencoder (the ceiling), with a 95% bootstrap
  interval over walks
  (`protocols.next_chunk`); on DOOM also on the held-out map MAP04 (`heldout_map`);
- a 128-frame open loop from one true chunk against repeat-last, and with mirrored controls
  (`protocols.open_loop`, `drift_scores`); the sharpness of its first 32 frames over the
  engine's (`metrics.sharpness_ratio`, as the autoencoder table measures it); the realism
  distance of its 128 frames beside the autoencoder's and repeat-last's (`realism`);
- prompted events: how often the kinds probe sees the prompted character after the prompt,
  and how often it sees one on the same walks unprompted, with intervals (`events`).
`--strip` draws each world's first walk beside the table: rows engine | the old world | the
world, open loop from one true chunk, frames STRIP_AT after it (`strip.rollout_strip`).
A walk that ends early is replaced by the next seed and counted (`ended_early`; on the
held-out map under `heldout_map_walks`). Each
world's scores are cached under --cache, so a rerun measures only what is missing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..metrics import sharpness_ratio
from ..paths import relative
from ..pretrained import load_world
from ..threads import use_threads
from .events import event_scores, event_walks
from .memory_bars import Bar, bar_rows
from .protocols import drift_scores, next_chunk, open_loop, whole_walks
from .realism import realism_scores
from .report import print_table
from .shipped import load_shipped_probes
from .stats import bootstrap
from .strip import rollout_strip
from .table_io import cache_key, cached, parse_models, write_strip, write_table

HORIZON = 128  # frames of the open loop
SHARP_FRAMES = 32  # the open loop's first frames whose sharpness is scored
STRIP_AT = (8, 32, 64, 128)  # the strip's frames, counted after the true first chunk
STARTS = 2  # next-chunk starts per walk
TRAIN_MAPS, HELDOUT_MAP = ("MAP01", "MAP02", "MAP03"), ("MAP04",)
OPTS = {"doom": {"monsters": "invulnerable"}, "procedural": {}}

BARS = {  # keys of a block's "bars" (`bar_values`): the world issue's
    "next_chunk_minus_warp_db": Bar("next chunk: world - warp-last (dB)", ">=", 0.5),
    "next_chunk_lo_minus_warp_db": Bar("next chunk: interval's lower end - warp-last's mean "
                                       "(dB)", ">", 0.0),
    "rollout128_minus_repeat_db": Bar("128-frame open loop: world - repeat-last (dB)", ">=",
                                      0.5),
    "mirrored_drop_db": Bar("mirrored controls: PSNR lost (dB)", ">=", 1.0),
    "event_hit_over_false_alarm": Bar("events: hit rate / false-alarm rate", ">=", 3.0),
    "event_intervals_apart": Bar("events: hit interval's lower end - false alarms' upper "
                                 "end", ">", 0.0),
    "rollout_sharpness_ratio": Bar("open loop's first 32 frames: sharpness / engine's", ">=",
                                   0.5),
    "realism_over_old": Bar("realism distance: world / old world", "<=", 0.5),
}


def walks_of(engine: str, n: int, frames: int, size: int, seed: int, maps=()) -> tuple:
    """`n` whole random-start walks of `engine` (DOOM: on `maps`) and how they were found."""
    return whole_walks(engine, n, frames, size, seed, maps=maps or None, start="random",
                       **OPTS[engine])


def world_scores(world, walks: list, events: dict | None, probes, engine: str,
                 heldout: list | None) -> dict:
    """The scores of one world on the walks (module docstring); `events` (`event_walks`)
    with `probes`, and `heldout` (the held-out map's walks), where there are any."""
    f = world.chunk_frames
    n = next_chunk(world, walks, STARTS)
    rolls = open_loop(world, walks, HORIZON)
    d = drift_scores(rolls, walks)
    gen = np.concatenate([g[:SHARP_FRAMES] for g in rolls["true"]])
    true = np.concatenate([ep.rgb[f:f + SHARP_FRAMES] for ep in walks])
    out = {"sampling_steps": world.config.sample.steps, "decoder": world.config.sample.decoder,
           **_next_chunk_row(n),
           "rollout128_psnr_mean": d["rollout_psnr_mean"],
           "rollout128_repeat_psnr_mean": float(np.mean(d["baseline_repeat_rollout_psnr"])),
           "rollout128_psnr": d["rollout_psnr"],
           "rollout128_repeat_psnr": d["baseline_repeat_rollout_psnr"],
           "mirrored_drop_db": float(np.mean(d["mirrored_drop_per_episode"])),
           "mirrored_drop_db_ci": _ci(d["mirrored_drop_per_episode"]),
           "rollout_sharpness_ratio": sharpness_ratio(gen, true),
           **realism_scores(world, rolls, walks, engine)}
    if events is not None:
        ev = event_scores({"world": world}, events, probes)
        if "rows" in ev:
            row = ev["rows"]["world"]
            hit, false = row["hit_share"], row["false_alarm_share"]
            out |= {"event_hit_rate": hit["mean"], "event_hit_rate_ci": [hit["lo"], hit["hi"]],
                    "event_false_alarm_rate": false["mean"],
                    "event_false_alarm_rate_ci": [false["lo"], false["hi"]],
                    "event_prompt": ev["prompt"], "event_walks": ev["walks"]}
        else:
            out["events_skipped"] = ev["skipped"]
    if heldout:
        out["heldout_map"] = _next_chunk_row(next_chunk(world, heldout, STARTS))
    return out


def _ci(values) -> list[float]:
    b = bootstrap(values)
    return [b["lo"], b["hi"]]


def _next_chunk_row(n: dict) -> dict:
    return {"next_chunk_psnr": n["next_chunk_psnr"],
            "next_chunk_psnr_ci": _ci(n["next_chunk_psnr_per_episode"]),
            "baseline_warp_psnr": n["baseline_warp_psnr"],
            "baseline_view_warp_psnr": n["baseline_view_warp_psnr"],
            "baseline_repeat_psnr": n["baseline_repeat_psnr"],
            "autoencoder_psnr": n["autoencoder_psnr"],
            "next_chunk_samples": n["next_chunk_samples"],
            "next_chunk_context_frames": n["next_chunk_context_frames"]}


def bar_values(block: dict) -> dict:
    """The values BARS judge, from a block's new world and its old one; an event bar is
    left out where the probe could not score events."""
    w, old = block["world"], block["old"]["world"]
    out = {"next_chunk_minus_warp_db": w["next_chunk_psnr"] - w["baseline_warp_psnr"],
           "next_chunk_lo_minus_warp_db": w["next_chunk_psnr_ci"][0] - w["baseline_warp_psnr"],
           "rollout128_minus_repeat_db": (w["rollout128_psnr_mean"]
                                          - w["rollout128_repeat_psnr_mean"]),
           "mirrored_drop_db": w["mirrored_drop_db"],
           "rollout_sharpness_ratio": w["rollout_sharpness_ratio"]}
    if w.get("realism_distance") is not None and old.get("realism_distance"):
        out["realism_over_old"] = w["realism_distance"] / old["realism_distance"]
    if "event_hit_rate" in w:
        out["event_hit_over_false_alarm"] = (w["event_hit_rate"]
                                             / max(w["event_false_alarm_rate"], 1e-9))
        out["event_intervals_apart"] = (w["event_hit_rate_ci"][0]
                                        - w["event_false_alarm_rate_ci"][1])
    return out


def block(name: str, new: Path, old: Path, args) -> tuple[dict, np.ndarray | None]:
    """One default world's block (its walks, the new world's scores, the old world's on the
    same walks, and the bars) and, with --strip, its rows of the strip."""
    worlds = {"world": load_world(new, device="cpu"), "old": load_world(old, device="cpu")}
    engines = {w.config.data.engine for w in worlds.values()}
    sizes = {(w.size, w.chunk_frames) for w in worlds.values()}
    if len(engines) != 1 or len(sizes) != 1:
        got = {k: (w.config.data.engine, w.size, w.chunk_frames) for k, w in worlds.items()}
        raise ValueError(f"{name}: the world and the old world must share an engine, a frame "
                         f"size and a chunk length (the same walks), got {got}")
    engine, (size, f) = engines.pop(), sizes.pop()
    frames = 2 * f + HORIZON
    maps = TRAIN_MAPS if engine == "doom" else ()
    walks, info = walks_of(engine, args.walks, frames, size, args.seed, maps)
    heldout, heldout_info = (walks_of(engine, args.walks, frames, size, args.seed, HELDOUT_MAP)
                             if engine == "doom" else (None, None))
    probes, events = None, None
    if args.event_walks:
        probes = load_shipped_probes(engine)
        events = event_walks(engine, args.event_walks, size, f, seed=args.seed + 50_000)
    key = (engine, args.walks, args.event_walks, args.seed, HORIZON, STARTS)
    scores = {k: cached(f"{args.cache}/{name}-{k}-{cache_key(p, *key)}.json",
                        lambda w=w: world_scores(w, walks, events, probes, engine, heldout))
              for (k, w), p in zip(worlds.items(), (new, old))}
    b = {"engine": engine, "walks": len(walks), "frames_per_walk": frames,
         "maps": list(maps), "heldout_map": list(HELDOUT_MAP) if heldout else [],
         "engine_options": OPTS[engine], "start": "random", "first_seed": args.seed, **info,
         "heldout_map_walks": heldout_info,
         "checkpoint": relative(new), "world": scores["world"],
         "old": {"checkpoint": relative(old), "world": scores["old"]}}
    b["bars"] = bar_values(b)
    if not args.strip:
        return b, None
    b["strip"] = {"walk_seed": walks[0].meta.get("seed"), "rows": ["engine", "old", "world"],
                  "frames_after_first_chunk": list(STRIP_AT)}
    return b, rollout_strip({k: worlds[k] for k in ("old", "world")}, walks[0], STRIP_AT)


def _stacked(images: list[np.ndarray]) -> np.ndarray:
    """Images (h, w, 3) one under another, each padded on the right to the widest."""
    width = max(im.shape[1] for im in images)
    return np.concatenate([np.pad(im, ((0, 0), (0, width - im.shape[1]), (0, 0)))
                           for im in images])


def cli(args) -> int:
    use_threads(args.threads)
    new, old = parse_models(args.world, "--world"), parse_models(args.old, "--old")
    if set(new) != set(old):
        raise ValueError(f"every --world needs an --old of the same name, got worlds "
                         f"{sorted(new)} and old {sorted(old)}")
    made = {name: block(name, new[name], old[name], args) for name in new}
    blocks = {name: b for name, (b, _) in made.items()}
    if args.strip:
        write_strip(args.out, _stacked([image for _, image in made.values()]))
    write_table(args.out, {
        "what": "each default world against the default it replaces, on the same fresh "
                "held-out walks (worldlab/evaluate/defaults_table.py)",
        "horizon": HORIZON, "sharpness_frames": SHARP_FRAMES, "next_chunk_starts": STARTS,
        "budget": args.budget, "threads": args.threads, "worlds": blocks})
    for name, b in blocks.items():
        w, o = b["world"], b["old"]["world"]
        print(f"{name} ({b['walks']} walks): next chunk {w['next_chunk_psnr']:.2f} (old "
              f"{o['next_chunk_psnr']:.2f}), warp-last {w['baseline_warp_psnr']:.2f}, view "
              f"warp {w['baseline_view_warp_psnr']:.2f}, "
              f"repeat-last {w['baseline_repeat_psnr']:.2f}; open loop "
              f"{w['rollout128_psnr_mean']:.2f} vs repeat-last "
              f"{w['rollout128_repeat_psnr_mean']:.2f}")
        print_table(bar_rows(b["bars"], BARS), f"{name}: the world issue's bars")
    return 0
