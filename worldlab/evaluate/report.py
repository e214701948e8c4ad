"""Reports: the tables printed for people, and where a shipped number came from.

Benchmarks and the evaluation suite print through `print_table` and write their JSON with
`atomic.atomic_write_json`; `provenance` is what a file under data/results/ records beside
its numbers. Nothing here measures anything.
"""

from __future__ import annotations

import datetime
import subprocess

import numpy as np

from ..paths import ROOT


def _git(*args: str) -> str:
    """The output of a read-only git command in the repository ('' if git fails)."""
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def provenance(command: str) -> dict:
    """The command that made a result, the commit it ran at (None outside a repository),
    whether the tracked files had uncommitted changes, and the date."""
    return {"command": command, "commit": _git("rev-parse", "HEAD") or None,
            "uncommitted_changes": bool(_git("status", "--porcelain",
                                             "--untracked-files=no")),
            "measured": datetime.date.today().isoformat()}


def print_table(rows: list[dict], title: str = "") -> None:
    """Rows of dicts as aligned columns (the first row's keys); floats to 4 digits."""
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


def print_quick(r: dict) -> None:
    """The quick suite's table, its bars and its runtime line."""
    rows = [{"protocol": "autoencoder reconstruction", "psnr_db": r["autoencoder_psnr"]},
            {"protocol": "next chunk: model", "psnr_db": r["next_chunk_psnr"]},
            {"protocol": "next chunk: repeat last frame", "psnr_db": r["baseline_repeat_psnr"]},
            {"protocol": "next chunk: warp last frame", "psnr_db": r["baseline_warp_psnr"]
             if r["baseline_warp_psnr"] is not None else "n/a"},
            {"protocol": f"rollout {len(r['rollout_psnr'])} frames: model (mean)",
             "psnr_db": r["rollout_psnr_mean"]},
            {"protocol": "rollout: repeat last frame (mean)",
             "psnr_db": float(np.mean(r["baseline_repeat_rollout_psnr"]))},
            {"protocol": "rollout: mirrored controls (mean)",
             "psnr_db": r["mirrored_actions_rollout_psnr"]}]
    print_table(rows, "quick suite (PSNR against the engine's frames, held-out episodes)")
    b = r["bars"]
    print(f"bars: next chunk - repeat = {b['next_chunk_minus_repeat_db']:+.2f} dB (>= 2); "
          f"rollout beats repeat at every step: {b['rollout_beats_repeat_every_step']}; "
          f"mirrored controls cost {b['mirrored_drop_db']:+.2f} dB (>= 1)")
    print_realism(r)
    print(f"runtime: {r['fps']:.1f} frames/s, {r['chunk_latency_ms']:.1f} ms per chunk, "
          f"chunk 50 / chunk 2 cost = {r['cost_ratio_chunk50_chunk2']:.2f}")


def print_realism(r: dict) -> None:
    """The quick suite's realism rows (`realism.realism_scores`), or why there are none
    (results written before them have neither)."""
    if r.get("realism_distance") is None:
        print(r.get("realism_note") or "no realism score in this result")
        return
    print_table([{"rollout frames": name, "frechet": r[key]} for name, key in
                 (("model", "realism_distance"), ("autoencoder", "realism_distance_ae"),
                  ("repeat last frame", "realism_distance_repeat"))],
                f"realism (lower is closer to the engine; blur cannot win it): "
                f"{r['realism_note']}")


LONG_COLUMNS = {"psnr": "psnr", "drift-free": "psnr_drift_free", "repeat": "psnr_repeat",
                "ae": "psnr_ae", "sharp/df": "sharpness_ratio_vs_drift_free",
                "sharp/ae": "sharpness_ratio_vs_ae", "motion/ae": "motion_ratio_vs_ae",
                "colour": "colour_distance"}


def print_long(methods: dict, seeds: dict | None = None) -> None:
    """The long-horizon table: one row per method and window (early, late); then, for
    methods trained with several seeds (`stats.combine_seeds`), mean +- std over seeds."""
    rows = [{"method": name, "window": "-".join(map(str, r[f"window_{w}"])),
             **{col: r[f"{key}_{w}"] for col, key in LONG_COLUMNS.items()}}
            for name, r in methods.items() for w in ("early", "late")]
    print_table(rows, "long horizon: open loop against the engine (PSNR dB; ratios of "
                      "means; colour = histogram distance)")
    if seeds:
        print_table([{"method": f"{name} ({s['seeds']} seeds)",
                      **{k: f"{v['mean']:.3g} +- {v['std']:.2g}" for k, v in s.items()
                         if k != "seeds"}} for name, s in seeds.items()],
                    "over training seeds: mean +- std")


REVISIT_COLUMNS = {"ssim": "return_ssim", "self-cons": "self_consistency_psnr",
                   "all-frames": "all_frames_psnr", "ms/chunk": "ms_per_chunk",
                   "cost 100/2": "cost_ratio_chunk100_chunk2",
                   "growth/base": "growth_vs_first", "ms/base": "ms_vs_first",
                   "tokens/frame": "memory_tokens_per_frame"}


def _revisit_row(name: str, r: dict) -> dict:
    """One row of the revisit table: return PSNR with its 95% interval, then the columns of
    REVISIT_COLUMNS ('n/a' for what the row does not have)."""
    lo, hi = r["return_psnr_ci"]
    row = {"world": name, "return psnr [95% CI]": f"{r['return_psnr']:.2f} [{lo:.2f}, {hi:.2f}]"}
    for col, key in REVISIT_COLUMNS.items():
        v = r.get(key)
        row[col] = "n/a" if v is None else float(v)
    return row


def print_revisit(result: dict) -> None:
    """The revisit table: one row per world, then the references (`revisit.revisit`), and
    for worlds trained with several seeds mean +- std over seeds."""
    rows = [_revisit_row(name, r) for name, r in result["variants"].items()]
    rows += [_revisit_row(f"ref: {name}", r) for name, r in result["references"].items()]
    e = result["episodes"]
    print_table(rows, f"revisit: {result['return_frames']} return frames (>= "
                      f"{result['min_gap']} frames after a view covering >= "
                      f"{result['min_overlap']:.0%} of them) in {e['count']} episodes "
                      f"({e['excluded']} without one left out); PSNR dB against the engine, "
                      f"self-cons = PSNR of a world's return frame against its own outbound "
                      f"frame warped there")
    if result.get("seeds"):
        print_table([{"world": f"{name} ({s['seeds']} seeds)",
                      **{k: f"{v['mean']:.3g} +- {v['std']:.2g}" for k, v in s.items()
                         if k != "seeds"}} for name, s in result["seeds"].items()],
                    "over training seeds: mean +- std")
