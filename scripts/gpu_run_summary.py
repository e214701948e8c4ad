"""The last stage of scripts/gpu_run.sh: gather the run's JSON files into OUT/summary.json
and print it. Every number is read from a file the run wrote; nothing is measured here.

    python scripts/gpu_run_summary.py OUT --seconds 431
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worldlab.atomic import atomic_write_json  # noqa: E402
from worldlab.paths import DATA  # noqa: E402

BUDGET_S = 9 * 60  # one device call may last 10 minutes: leave room for the transfers
CPU_REFERENCE = DATA / "results" / "bench_train_cpu.json"  # the same presets on a CPU
DOOM64_SHIPPED = DATA / "checkpoints" / "doom64" / "eval_quick.json"  # same suite, on a CPU


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _stages(out: Path) -> dict[str, int]:
    rows = (line.split("\t") for line in (out / "stages.tsv").read_text().splitlines())
    return {row[0]: int(row[1]) for row in rows if row[0]}


def _quick(result: dict | None) -> dict | None:
    keys = ("next_chunk_psnr", "rollout_psnr_mean", "baseline_repeat_psnr",
            "baseline_warp_psnr", "autoencoder_psnr", "fps")
    if result is None:
        return None
    return {**{k: result.get(k) for k in keys},
            "metric_depth": result.get("episodes", {}).get("metric_depth", True)}


def _speed_up(train: dict) -> float | None:
    """GPU steps/s over the CPU's for the same preset and overrides, if measured."""
    reference = _read(CPU_REFERENCE) or {}
    for row in reference.get("rows", []):
        if row["preset"] == train["preset"] and row["overrides"] == train["overrides"]:
            return train["steps_per_s"] / row["steps_per_s"]
    return None


def summarize(out: Path, seconds: int) -> dict:
    train = _read(out / "bench" / "train.json")
    model, model_256 = (_read(out / "bench" / d / "model.json") for d in ("model", "model_256"))
    world = _read(out / "world" / "world_config.json")
    ours = _quick(_read(out / "eval" / "quick.json"))
    measured = (out / "eval_doom64" / "quick.json").exists()
    doom64 = _quick(_read(out / "eval_doom64" / "quick.json" if measured else DOOM64_SHIPPED))
    summary = {
        "seconds": seconds, "under_budget": seconds <= BUDGET_S, "budget_s": BUDGET_S,
        "device": train["device_name"], "stages_s": _stages(out),
        "world": {"preset": world["preset"], "steps": world["train"]["steps"],
                  "batch_size": world["train"]["batch_size"], "size": world["data"]["size"],
                  "episodes": world["data"]["episodes"]},
        "train": {k: train[k] for k in ("steps_per_s", "samples_per_s", "data_wait_fraction",
                                        "peak_memory_gib", "sdpa_fused")},
        "train_loaders": train["loaders"], "speed_up_over_cpu": _speed_up(train),
        "stream_fps": {"trained_4_steps": model["fps"],
                       f"fresh_{model_256['size']}px_4_steps": model_256["fps"]},
        "quick_suite": {"this_run": ours, "doom64": doom64,
                        "doom64_from": "this run" if measured else str(DOOM64_SHIPPED)},
    }
    if ours is not None and doom64 is not None:
        summary["beats_doom64"] = all(ours[k] > doom64[k]
                                      for k in ("next_chunk_psnr", "rollout_psnr_mean"))
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seconds", type=int, required=True, help="the run's wall-clock time")
    args = ap.parse_args()
    summary = summarize(args.out, args.seconds)
    print(json.dumps(summary, indent=2))
    print(f"wrote {atomic_write_json(args.out / 'summary.json', summary)}")


if __name__ == "__main__":
    main()
