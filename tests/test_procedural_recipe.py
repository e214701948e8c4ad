"""proc64's recipe (the proc_* and peer stages of experiments/benchmark.yaml) at tiny size:
every stage runs on the real procedural engine and the shipped DOOM weights through the spec
runner, packages a 4-step world that plays with its fast decoder and a peer, and a second run
finds nothing left to do."""

from __future__ import annotations

from pathlib import Path

import yaml

from worldlab.evaluate.peer import load_peer
from worldlab.experiments.runner import run_spec
from worldlab.pretrained import load_world

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "experiments" / "benchmark.yaml"
# the shipped sizes -> tiny ones, in the stages' command lines and outputs
TINY = {"--episodes 900": "--episodes 4", "--steps 200": "--steps 2", "--steps 240": "--steps 2",
        "--steps 2726": "--steps 2", "distill__pairs=512": "distill__pairs=4",
        "--minutes 45": "--minutes 0.1", "step_00000800": "step_00000002"}


def tiny_spec(tmp_path: Path) -> Path:
    """benchmark.yaml's proc64 stages (and the procedural peer) at tiny size, its paths in
    tmp_path; the shipped checkpoints it starts from stay where they are."""
    raw = yaml.safe_load(SPEC.read_text())
    raw["vars"].update(teacher=str(ROOT / "data/checkpoints/doom64_teacher"),
                       ae=str(ROOT / "data/checkpoints/doom64/autoencoder"),
                       proc=str(tmp_path / "run"), proc64=str(tmp_path / "proc"))
    stages = [s for s in raw["stages"] if s["name"].startswith("proc") or s["name"] == "peer"]
    for stage in stages:
        for key in ("run", "outputs"):
            text = yaml.safe_dump(stage.get(key))
            for shipped, tiny in TINY.items():
                text = text.replace(shipped, tiny)
            stage[key] = yaml.safe_load(text)
        if stage["name"] == "proc_world":  # the recipe's own 800 steps
            stage["run"] += " --steps 2"
        if stage["name"] == "peer":  # a variant's values are not templates: spelt out
            stage["variants"] = {"procedural": {"data": str(tmp_path / "run/data"),
                                                "out": str(tmp_path / "run/peer")}}
    raw.update(stages=stages, result=str(tmp_path / "unused.json"))
    path = tmp_path / "benchmark.yaml"  # a spec's name is its file's stem
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_the_recipe_packages_a_procedural_world_and_resumes(tmp_path):
    spec = tiny_spec(tmp_path)
    first = run_spec(spec, root=tmp_path)
    assert all(state == "ran" for jobs in first.values() for state in jobs.values()), first
    world = load_world(tmp_path / "proc", device="cpu")
    assert world.config.data.engine == "procedural" and world.config.data.episodes == 4
    assert world.config.sample.steps == 4 and world.config.sample.decoder == "fast"
    assert world.decoder is world.fast_decoder
    peer = load_peer(tmp_path / "run" / "peer" / "ema")
    assert peer.size == world.size

    second = run_spec(spec, root=tmp_path)  # everything is there: nothing runs again
    assert all(state == "done" for jobs in second.values() for state in jobs.values()), second
