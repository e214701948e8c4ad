"""scripts/train_procedural_world.sh at tiny size: every stage of proc64's recipe runs on the
real procedural engine and the shipped DOOM weights, packages a 4-step world that plays
with its fast decoder and a peer, and a second run resumes with nothing left to do."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from worldlab.evaluate.peer import load_peer
from worldlab.pretrained import load_world

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("record", "teacher world model", "decoder", "peer", "4-step student", "fast decoder")


def run_recipe(tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PY": sys.executable, "RUN": str(tmp_path / "run"),
           "DEST": str(tmp_path / "proc"), "SHIP_TO": str(tmp_path / "peer"), "EPISODES": "4",
           "WORLD_STEPS": "2", "AE_STEPS": "2", "STUDENT_STEPS": "2", "PAIRS": "4",
           "FAST_STEPS": "2", "MINUTES": "0.1"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "train_procedural_world.sh")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    return done


def stages_run(done: subprocess.CompletedProcess, run: Path) -> set[str]:
    """The stages that started, from the script's own lines and its lanes' logs."""
    text = done.stdout + "".join(p.read_text() for p in run.glob("*.log"))
    return set(re.findall(r"^\[train_procedural_world\] \d\d:\d\d:\d\d (.+)$", text, re.M))


def test_the_recipe_packages_a_procedural_world_and_resumes(tmp_path):
    first, run = run_recipe(tmp_path), tmp_path / "run"
    packaging = f"package into {tmp_path / 'proc'}"
    assert stages_run(first, run) == {*STAGES, packaging, "done"}
    world = load_world(tmp_path / "proc", device="cpu")
    assert world.config.data.engine == "procedural" and world.config.data.episodes == 4
    assert world.config.sample.steps == 4 and world.config.sample.decoder == "fast"
    assert world.decoder is world.fast_decoder
    record = json.loads((tmp_path / "proc" / "distill_run.json").read_text())
    assert record["recipe"] == "ode" and record["steps"] == 2
    peer = load_peer(tmp_path / "peer")
    assert peer.size == world.size
    assert json.loads((tmp_path / "peer" / "train_run.json").read_text())["episodes"] == 4

    for log in run.glob("*.log"):
        log.unlink()
    second = run_recipe(tmp_path)  # everything is there: only the packaging runs again
    assert stages_run(second, run) == {packaging, "done"} and "encoded 0" in second.stdout
