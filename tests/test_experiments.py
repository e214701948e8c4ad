"""The experiment runner (`python -m worldlab run`): a tiny spec end to end through local
processes and through submitit's local executor gives the same shipped JSON; finished jobs
are never redone; every bad spec stops before any work with its file and line; a dirty tree
or an absolute path never ships; every spec in experiments/ plans."""

import json
import subprocess
from pathlib import Path

import pytest

from worldlab.experiments import SpecError, load_spec, run_spec
from worldlab.experiments.plan import plan, start_order
from worldlab.experiments.ship import ShipError

REPO = Path(__file__).resolve().parents[1]

TINY = """\
name: tiny
title: a tiny autoencoder on two procedural episodes, two training seeds
result: data/results/tiny.json
notes: |
  The runner's own test.
vars:
  data: runs/tiny/data
seeds:
  train: [0, 1]
stages:
  - name: record
    kind: record
    run: >-
      data record --engine procedural --preset tiny --episodes 2 --frames 8 --size 32
      --workers 1 --seed 5 --out {data}
    outputs: ["{data}/index.json"]
  - name: train
    kind: train
    variants: {ae: {steps: 2}}
    seeds: train
    threads: 1
    run: >-
      train autoencoder --preset tiny --data {data} --steps {steps} --device cpu
      --set autoencoder__seed={seed} --out runs/tiny/{job}
    resume: {when: "runs/tiny/{job}/checkpoints", add: --resume}
    inputs: ["{data}/index.json"]
    outputs: ["runs/tiny/{job}/metrics.json"]
  - name: ship_rows
    kind: ship
    from: {seed0: runs/tiny/ae/metrics.json, seed1: runs/tiny/ae_seed1/metrics.json}
    to: data/results/tiny_rows.json
  - name: ship
    kind: ship
    from: runs/tiny/ae/metrics.json
    files: {"runs/tiny/ae_seed1/metrics.json": data/results/tiny_seed1.json}
"""


def _git(root, *args):
    import os
    when = "2026-01-01T00:00:00+00:00"  # one date: the same tree gives the same commit
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=env)


def _repo(tmp_path: Path, spec: str = TINY, name: str = "tiny") -> Path:
    root = tmp_path / "repo"
    (root / "experiments").mkdir(parents=True)
    (root / "experiments" / f"{name}.yaml").write_text(spec)
    (root / ".gitignore").write_text("runs/\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "spec")
    return root


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """The tiny spec run twice, once per executor, in two fresh repositories."""
    out = {}
    for executor in ("local", "submitit-local"):
        root = _repo(tmp_path_factory.mktemp(executor))
        report = run_spec(root / "experiments/tiny.yaml", root=root, jobs=2, executor=executor)
        out[executor] = (root, report)
    return out


def test_local_and_submitit_ship_the_same_json(shipped):
    (a, report_a), (b, report_b) = shipped["local"], shipped["submitit-local"]
    assert report_a == report_b == {"record": {"record": "ran"},
                                    "train": {"ae": "ran", "ae_seed1": "ran"},
                                    "ship_rows": {"ship_rows": "ran"},
                                    "ship": {"ship": "ran"}}
    for name in ("tiny.json", "tiny_seed1.json", "tiny_rows.json"):
        assert (a / "data/results" / name).read_bytes() == (b / "data/results" / name).read_bytes()
    data = json.loads((a / "data/results/tiny.json").read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=a, capture_output=True,
                          text=True).stdout.strip()
    assert data["spec"] == "experiments/tiny.yaml" and data["commit"] == head
    assert data["uncommitted_changes"] is False
    assert data["spec_hash"] == load_spec(a / "experiments/tiny.yaml").hash
    assert data["command"] == "python -m worldlab run experiments/tiny.yaml"
    assert data["psnr"] > 0
    assert data["stages"] == {j: {"commit": head, "uncommitted_changes": False}
                              for j in ("record/record", "train/ae", "train/ae_seed1")}
    rows = json.loads((a / "data/results/tiny_rows.json").read_text())
    assert rows["rows"]["seed0"] == {k: data[k] for k in rows["rows"]["seed0"]}
    assert rows["spec"] == "experiments/tiny.yaml" and set(rows["rows"]) == {"seed0", "seed1"}
    # the two seeds trained differently: the seeds reached the jobs
    assert data["psnr"] != json.loads((a / "data/results/tiny_seed1.json").read_text())["psnr"]


def test_a_rerun_redoes_nothing_and_an_interrupted_job_resumes(shipped):
    root, _ = shipped["local"]
    spec = root / "experiments/tiny.yaml"
    assert run_spec(spec, root=root) == {"record": {"record": "done"},
                                         "train": {"ae": "done", "ae_seed1": "done"},
                                         "ship_rows": {"ship_rows": "done"},
                                         "ship": {"ship": "done"}}
    # a job cut off after its checkpoint, before it finished: only it runs again, resumed
    (root / "runs/tiny/ae_seed1/metrics.json").unlink()
    (root / "runs/experiments/tiny/train/ae_seed1.json").unlink()
    report = run_spec(spec, root=root)
    assert report["train"] == {"ae": "done", "ae_seed1": "ran"}
    assert report["record"] == {"record": "done"}
    log_argv = plan(load_spec(spec), root)[1][1][1]
    assert log_argv.resume == ("runs/tiny/ae_seed1/checkpoints", ("--resume",))


def test_the_spec_hash_ignores_prose_only():
    a = load_spec_text(TINY)
    b = load_spec_text(TINY.replace("The runner's own test.", "Another note."))
    c = load_spec_text(TINY.replace("--frames 8", "--frames 9"))
    assert a.hash == b.hash != c.hash


def load_spec_text(text):
    import tempfile
    d = Path(tempfile.mkdtemp())
    (d / "tiny.yaml").write_text(text)
    return load_spec(d / "tiny.yaml")


# ---------------------------------------------------------------- bad specs stop before work

PACK = ("  - name: ship\n", "  - name: pack\n    kind: package\n    over: trainn\n"
        "    run: data info --store {data}\n  - name: ship\n")


@pytest.mark.parametrize("edit, anchor, needle, message", [
    (("kind: train", "kind: trian"), "name: train", "kind:", "unknown kind 'trian'"),
    (("    threads: 1\n", "    threads: 1\n    colour: red\n"), "name: train", "colour:",
     "unknown key 'colour'"),
    (("train autoencoder --preset tiny", "train memory --variant wings --preset tiny"),
     "name: train", "run:", "invalid choice: 'wings'"),
    (("--out runs/tiny/{job}", "--set model__wings=2 --out runs/tiny/{job}"), "name: train", "run:",
     "--set model__wings"),
    (("--seed 5 --out", "--seed 999999 --out"), "name: record", "run:", "reach HELDOUT_SEED"),
    (("  train: [0, 1]\n", "  train: [0, 1]\n  validation: 1000000\n  report: 1000000\n"),
     "seeds:", "seeds:", "in both 'validation' and 'report'"),
    (('inputs: ["{data}/index.json"]', 'inputs: ["runs/elsewhere/index.json"]'),
     "name: train", "inputs:", "input runs/elsewhere/index.json neither exists"),
    (("--steps {steps}", "--steps {step}"), "name: train", "run:", "unknown name {step}"),
    (PACK, "name: pack", "over:", "over 'trainn' is not an earlier stage"),
])
def test_a_bad_spec_names_its_line_and_runs_nothing(tmp_path, edit, anchor, needle, message):
    text = TINY.replace(*edit)
    assert text != TINY
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if anchor in line)
    line = next(i for i, text_line in enumerate(lines[first:], first + 1) if needle in text_line)
    root = _repo(tmp_path, text)
    with pytest.raises(SpecError) as e:
        run_spec(root / "experiments/tiny.yaml", root=root)
    assert message in str(e.value)
    assert str(e.value).startswith(f"{root / 'experiments/tiny.yaml'}:{line}: ")
    assert not (root / "runs").exists(), "a bad spec must stop before any work"


def test_a_shipped_result_does_not_make_the_tree_dirty(tmp_path):
    from worldlab.experiments.ship import dirty
    root = _repo(tmp_path)
    (root / "data/results").mkdir(parents=True)
    (root / "data/results/old.json").write_text("{}")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "old")
    (root / "data/results/old.json").write_text('{"shipped": 1}')  # what a ship stage does
    assert not dirty(root)
    (root / "experiments/tiny.yaml").write_text(TINY + "\n")
    assert dirty(root)


def test_a_dirty_tree_never_ships(tmp_path):
    root = _repo(tmp_path)
    (root / "experiments/tiny.yaml").write_text(TINY + "\n# edited\n")
    with pytest.raises(ShipError, match="uncommitted changes"):
        run_spec(root / "experiments/tiny.yaml", root=root)
    assert not (root / "data/results/tiny.json").exists()
    run_spec(root / "experiments/tiny.yaml", root=root, allow_dirty=True, only=["ship"])
    preview = root / "runs/experiments/tiny/preview/tiny.json"
    assert json.loads(preview.read_text())["uncommitted_changes"] is True
    assert not (root / "data/results/tiny.json").exists()


def test_an_absolute_path_never_ships(tmp_path):
    from worldlab.experiments.ship import relative_paths
    root = tmp_path.resolve()
    assert relative_paths({"a": [str(root / "runs/x")]}, root) == {"a": ["runs/x"]}
    with pytest.raises(ShipError, match=r"\$.b holds the absolute path /elsewhere/x"):
        relative_paths({"b": "/elsewhere/x"}, root)


@pytest.mark.parametrize("path", sorted((REPO / "experiments").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_every_shipped_spec_plans(path):
    spec = load_spec(path)
    stages = plan(spec, REPO)
    assert [s.name for s, _ in stages] == [s.name for s in spec.stages]
    assert all(jobs for _, jobs in stages)


def test_every_variant_starts_its_first_seed_before_any_second(tmp_path):
    root = _repo(tmp_path, TINY.replace("variants: {ae: {steps: 2}}",
                                        "variants: {ae: {steps: 2}, big: {steps: 3}}"))
    stages = dict((s.name, jobs) for s, jobs in plan(load_spec(root / "experiments/tiny.yaml"),
                                                     root))
    assert [j.name for j in stages["train"]] == ["ae", "ae_seed1", "big", "big_seed1"]
    assert [j.name for j in start_order(stages["train"])] == ["ae", "big", "ae_seed1",
                                                              "big_seed1"]


def test_a_rerun_never_writes_over_a_shipped_world(tmp_path):
    from worldlab.experiments import RunError
    root = _repo(tmp_path, TINY.replace("data: runs/tiny/data", "data: data/tiny"))
    (root / "data/tiny").mkdir(parents=True)
    (root / "data/tiny/index.json").write_text("{}")  # shipped, made by no stamped job here
    with pytest.raises(RunError, match="record/record: data/tiny/index.json"):
        run_spec(root / "experiments/tiny.yaml", root=root)
    assert (root / "data/tiny/index.json").read_text() == "{}"
    assert not (root / "runs").exists()


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_stopped_runner_leaves_no_job_behind(tmp_path, how):
    """A job's process ends with the runner: stopped (SIGTERM, as Ctrl-C) or killed."""
    import os
    import signal
    import sys
    import time

    import psutil
    spec = TINY.split("stages:")[0] + """stages:
  - name: wait
    kind: evaluate
    run: scripts/wait.py runs/pid
    outputs: [runs/never]
"""
    root = _repo(tmp_path, spec)
    (root / "scripts").mkdir()
    (root / "scripts/wait.py").write_text(
        "import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(120)\n")
    (root / "runs").mkdir()
    runner = subprocess.Popen([sys.executable, "-m", "worldlab", "run", "--root", str(root),
                               str(root / "experiments/tiny.yaml")], cwd=root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid_file = root / "runs/pid"
    for _ in range(300):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    job = psutil.Process(int(pid_file.read_text()))
    os.kill(runner.pid, getattr(signal, how))
    out, err = runner.communicate(timeout=30)
    job.wait(30)  # raises TimeoutExpired if the job outlived its runner
    assert not job.is_running()
    assert not (root / "runs/experiments/tiny/wait/wait.json").exists()  # no stamp
    if how == "SIGTERM":  # told, not killed: it says so, without a traceback
        assert runner.returncode == 130 and "Traceback" not in err
        assert "stopped (signal 15): finished jobs keep their stamps" in out


def test_a_job_that_ran_while_the_code_changed_is_stamped_unclean(tmp_path):
    """The stamp compares the tree when the job was handed over with the tree when it ended:
    a commit that touched worldlab/ in between means the job may have run either code."""
    from worldlab.experiments.runner import _stamp, stamp_path, tree_state

    root = _repo(tmp_path)
    spec = load_spec(root / "experiments/tiny.yaml")
    job = plan(spec, root)[0][1][0]
    commit = ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m")

    def stamped(path: str) -> dict:
        submitted = tree_state(root)
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(f"# {path}\n")
        _git(root, "add", "-A")
        _git(root, *commit, path)
        _stamp(root, spec, job, submitted)
        return json.loads(stamp_path(root, spec, job).read_text())

    docs = stamped("docs/notes.md")  # the code the job ran is the end commit's
    assert docs["uncommitted_changes"] is False and docs["commit"] != docs["commit_at_submit"]
    code = stamped("worldlab/new_module.py")
    assert code["uncommitted_changes"] is True
