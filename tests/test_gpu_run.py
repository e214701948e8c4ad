"""scripts/gpu_run.sh --dry-run: every stage of the prepared device run, on the CPU at
tiny size, so the script is known to work before GPU time is spent on it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ["check", "record", "world", "package", "eval", "bench_model", "bench_model_256",
          "bench_train"]


def test_gpu_run_dry_run_writes_one_folder(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_run.sh"), "--dry-run", "--out",
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["stages_s"]) == STAGES
    assert summary["world"]["preset"] == "tiny" and summary["world"]["steps"] == 4
    assert summary["world"]["size"] == 64 and summary["world"]["episodes"] == 4
    assert summary["train"]["steps_per_s"] > 0 and 0 <= summary["train"]["data_wait_fraction"] < 1
    assert set(summary["train_loaders"]) == {"tensors", "episodes"}
    assert summary["stream_fps"]["trained_4_steps"] > 0
    assert summary["stream_fps"]["fresh_64px_4_steps"] > 0
    assert summary["quick_suite"]["this_run"]["next_chunk_psnr"] > 0
    model = json.loads((out / "bench" / "model" / "model.json").read_text())
    assert model["sample_steps"] == 4 and model["size"] == 64
    for path in ("checkpoint/world_config.json", "world/ema", "eval/quick.json"):
        assert (out / path).exists(), path


def test_gpu_run_rejects_unknown_arguments():
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_run.sh"), "--fast"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unknown argument --fast" in done.stderr
