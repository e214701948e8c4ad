"""Run a spec: stage after stage, the jobs of a stage side by side, each job skipped when its
stamp says it finished with the same command and its outputs are there.

    run_spec("experiments/memory.yaml")                       # local processes, one at a time
    run_spec("experiments/memory.yaml", jobs=2)               # two jobs of a stage at once
    run_spec("experiments/memory.yaml", executor="slurm", slurm={"partition": "gpu"})
    run_spec("experiments/memory.yaml", dry_run=True)         # the plan, nothing runs

Executors: `local` runs each job as a child process; `submitit-local` and `slurm` hand the
same function to submitit's LocalExecutor or its SLURM executor. A job's stamp
(runs/experiments/<name>/<stage>/<job>.json) is written only when it succeeded, so an
interrupted run starts the unfinished jobs again (training ones with `--resume` when their
checkpoints exist) and never redoes a finished one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..atomic import atomic_write_json
from .plan import Job, plan, start_order
from .ship import ship
from .spec import Spec, load_spec

EXECUTORS = ("local", "submitit-local", "slurm")


class RunError(RuntimeError):
    pass


# ---------------------------------------------------------------- one job

def job_argv(job: Job, root: Path) -> list[str]:
    """The full command line of a job (with the resume arguments when its checkpoint is
    there)."""
    args = list(job.argv)
    if job.resume and (root / job.resume[0]).exists():
        args += job.resume[1]
    if job.is_script:
        return [sys.executable, *args]
    if job.launcher == "accelerate":
        return [sys.executable, "-m", "accelerate.commands.launch", "-m", "worldlab", *args]
    return [sys.executable, "-m", "worldlab", *args]


def job_env(job: Job) -> dict[str, str]:
    env = dict(os.environ)
    if job.threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(job.threads)
    return env


def run_command(argv: list[str], cwd: str, env: dict, log: str | None, started=None) -> int:
    """Run one job's process to its end (what submitit calls on the worker); the process
    is stopped if this one is interrupted. `started(proc)` is told of the child."""
    from ..engines.reaper import release, start_guarded
    out = open(log, "ab") if log else None
    procs = []
    # guarded: a runner killed outright (SIGKILL, a kernel killed) takes its jobs with it
    guarded = start_guarded(lambda: procs.append(subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT if out else None)),
        Path(argv[0]).name[:15])  # the name the kernel gives the process (15 characters)
    proc = procs[0]
    if started:
        started(proc)
    try:
        return proc.wait()
    finally:
        stop(proc)
        release(guarded)
        if out:
            out.close()


def stop(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- stamps

def stamp_path(root: Path, spec: Spec, job: Job) -> Path:
    return root / "runs" / "experiments" / spec.name / job.stage / f"{job.name}.json"


def is_done(root: Path, spec: Spec, job: Job) -> bool:
    path = stamp_path(root, spec, job)
    try:
        stamp = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return (stamp.get("command") == job.command
            and all((root / o).exists() for o in job.outputs)
            and (job.argv[:1] != ("ship",) or _shipped_here(root, spec, job.argv[2])))


def _shipped_here(root: Path, spec: Spec, target: str) -> bool:
    """The shipped file is this spec's (same hash) from this commit: a file put back by git,
    or shipped before a new commit, ships again."""
    from .ship import git
    try:
        shipped = json.loads((root / target).read_text())
    except (OSError, ValueError):
        return False
    return (shipped.get("spec_hash") == spec.hash
            and shipped.get("commit") == (git(root, "rev-parse", "HEAD") or None))


def tree_state(root: Path) -> dict:
    """{"commit": HEAD, "uncommitted_changes": bool} of the checkout at `root` now."""
    from .ship import dirty, git
    return {"commit": git(root, "rev-parse", "HEAD") or None,
            "uncommitted_changes": dirty(root)}


def _stamp(root: Path, spec: Spec, job: Job, submitted: dict | None = None) -> None:
    """The job's stamp: its command, outputs and the commit it ran at. `submitted` is the
    tree's state when the job was handed to the executor: a job that was queued or ran
    while the code changed (a new commit that touched worldlab/, or uncommitted changes at
    either end) may not have run `commit`'s code, so it is stamped with uncommitted
    changes, which the ship stage refuses."""
    import datetime

    from .ship import git
    now = tree_state(root)
    submitted = submitted or now
    moved = submitted["commit"] != now["commit"] and bool(
        git(root, "diff", "--name-only", f"{submitted['commit']}..{now['commit']}", "--",
            "worldlab"))
    atomic_write_json(stamp_path(root, spec, job), {
        "command": job.command, "outputs": list(job.outputs), "commit": now["commit"],
        "commit_at_submit": submitted["commit"],
        "uncommitted_changes": (now["uncommitted_changes"] or moved
                                or submitted["uncommitted_changes"]),
        "finished": datetime.datetime.now().isoformat(timespec="seconds")})


def made_at(root: Path, spec: Spec, stages) -> dict[str, dict]:
    """Where each finished job of `spec` ran: {"stage/job": {"commit", "uncommitted_changes"}}
    from the stamps (what a shipped result records beside its own commit)."""
    out = {}
    for stage, jobs in stages:
        for job in jobs:
            if stage.kind == "ship" or not is_done(root, spec, job):
                continue
            stamp = json.loads(stamp_path(root, spec, job).read_text())
            out[f"{stage.name}/{job.name}"] = {k: stamp.get(k) for k in
                                               ("commit", "uncommitted_changes")}
    return out


# ---------------------------------------------------------------- executors

class _Local:
    """Jobs as child processes, `jobs` at once; interrupting stops every child."""

    def __init__(self, jobs: int):
        self.pool = ThreadPoolExecutor(max_workers=jobs)
        self.procs = []

    def submit(self, argv, cwd, env, log):
        return self.pool.submit(run_command, argv, cwd, env, log, self.procs.append)

    def close(self):
        self.pool.shutdown(wait=False, cancel_futures=True)
        for proc in self.procs:  # an interrupted run leaves no child behind
            stop(proc)
        self.pool.shutdown(wait=True)


class _Submitit:
    """Jobs through submitit: its LocalExecutor here, SLURM on a cluster."""

    def __init__(self, folder: Path, cluster: str, threads: int, slurm: dict):
        import submitit
        if cluster == "local":
            self.executor = submitit.LocalExecutor(folder=folder)
            self.executor.update_parameters(timeout_min=24 * 60)
        else:
            self.executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
            self.executor.update_parameters(
                timeout_min=24 * 60, cpus_per_task=threads,
                **{f"slurm_{k}": v for k, v in slurm.items()})
        self.running = []

    def submit(self, argv, cwd, env, log):
        job = self.executor.submit(run_command, argv, cwd, env, log)
        self.running.append(job)
        return job

    def close(self):
        for job in self.running:
            if not job.done():
                job.cancel()


def _executor(kind: str, jobs: int, folder: Path, threads: int, slurm: dict):
    if kind == "local":
        return _Local(jobs)
    if kind in ("submitit-local", "slurm"):
        return _Submitit(folder, "local" if kind == "submitit-local" else "slurm", threads,
                         slurm)
    raise ValueError(f"unknown executor {kind!r}; expected one of {EXECUTORS}")


# ---------------------------------------------------------------- the run

def run_spec(spec, root=".", jobs: int = 1, executor: str = "local", only=None,
             dry_run: bool = False, allow_dirty: bool = False, slurm: dict | None = None,
             progress=None) -> dict:
    """Run what is not done of `spec` (a path or a Spec); returns {stage: {job: state}},
    state one of done (skipped), ran, planned (dry run). `only` limits the run to the named
    stages (their inputs must exist). `progress(stage, job, state)` is told of each job:
    queued (handed to the executor, `jobs` run at once), then ran or failed; done if skipped."""
    root = Path(root).resolve()
    spec = spec if isinstance(spec, Spec) else load_spec(spec)
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; expected one of {EXECUTORS}")
    stages = plan(spec, root)
    names = [s.name for s, _ in stages]
    for name in only or ():
        if name not in names:
            raise ValueError(f"{spec.path}: no stage {name!r}; its stages are {names}")
    if not dry_run:
        _refuse_overwriting_shipped(spec, root, stages, only)
        for name, first in spec.after.items():  # other specs' stages this one reads
            run_spec(spec.path.parent / f"{name}.yaml", root, jobs, executor, only=first,
                     slurm=slurm, progress=progress)
    report: dict[str, dict[str, str]] = {}
    for stage, stage_jobs in stages:
        if only and stage.name not in only:
            continue
        todo = start_order([j for j in stage_jobs if not is_done(root, spec, j)])
        report[stage.name] = {j.name: ("planned" if j in todo else "done") for j in stage_jobs}
        for j in stage_jobs:
            if j not in todo and progress:
                progress(stage.name, j.name, "done")
        if dry_run or not todo:
            continue
        if stage.kind == "ship":
            for job in todo:
                _, source, target, *pairs = job.argv
                ship(spec, root, json.loads(source), target, dict(zip(pairs[::2], pairs[1::2])),
                     allow_dirty=allow_dirty, made_at=made_at(root, spec, stages))
                _stamp(root, spec, job)
                report[stage.name][job.name] = "ran"
                if progress:
                    progress(stage.name, job.name, "ran")
            continue
        _run_stage(spec, root, todo, jobs, executor, slurm or {}, report[stage.name],
                   progress)
    return report


def _refuse_overwriting_shipped(spec, root, stages, only) -> None:
    """A stage that would write over something shipped under data/ (a packaged world, the
    probes) stops the run before any work: only a ship stage replaces shipped files, and a
    shipped world is replaced by hand (delete it), never by a rerun in passing. A restore
    stage writes nothing over a world that is there (`retired.restore`)."""
    shipped = [f"{stage.name}/{job.name}: {out}" for stage, jobs in stages
               if stage.kind not in ("ship", "restore") and (not only or stage.name in only)
               for job in jobs if not is_done(root, spec, job)
               for out in job.outputs if Path(out).parts[:1] == ("data",) and (root / out).exists()]
    if shipped:
        raise RunError(f"{spec.name}: these jobs would write over shipped files: "
                       f"{'; '.join(shipped)}. Delete them to remake them, or run the spec in "
                       f"another clone")


def _run_stage(spec, root, todo, jobs, executor, slurm, report, progress) -> None:
    folder = root / "runs" / "experiments" / spec.name / "submitit"
    threads = max(j.threads or 1 for j in todo)
    pool = _executor(executor, jobs, folder, threads, slurm)
    quiet = jobs > 1 or executor != "local"  # side by side: each job writes its own log
    failed = []
    try:
        futures, submitted = [], tree_state(root)
        for job in todo:
            log = stamp_path(root, spec, job).with_suffix(".log")
            log.parent.mkdir(parents=True, exist_ok=True)
            if progress:
                progress(job.stage, job.name, "queued")
            futures.append((job, log, pool.submit(job_argv(job, root), str(root),
                                                  job_env(job), str(log) if quiet else None)))
        for job, log, future in futures:
            code = future.result()
            missing = [o for o in job.outputs if not (root / o).exists()]
            if code == 0 and not missing:
                _stamp(root, spec, job, submitted)
                report[job.name] = "ran"
            else:
                failed.append(f"{job.stage}/{job.name} (" + (
                    f"exit status {code}" if code else f"did not make {missing[0]}") +
                    (f"; log {log.relative_to(root)}" if quiet else "") + ")")
                report[job.name] = "failed"
            if progress:
                progress(job.stage, job.name, report[job.name])
    finally:
        pool.close()
    if failed:
        raise RunError(f"{spec.name}: {len(failed)} job(s) failed: {', '.join(failed)}; "
                       f"finished jobs keep their stamps, run again to retry the rest")


def describe(spec, root=".") -> str:
    """The plan of `spec` (a path or a Spec) as text: each stage, each job's command line, and
    what is done already (`run --dry-run` prints it; a notebook shows it before running)."""
    root = Path(root).resolve()
    spec = spec if isinstance(spec, Spec) else load_spec(spec)
    lines = [f"{spec.path}: {spec.title or spec.name} -> {spec.result}  (spec {spec.hash[:12]})"]
    lines += [f"  after: experiments/{name}.yaml stages {', '.join(stages)} (run first)"
              for name, stages in spec.after.items()]
    for stage, jobs in plan(spec, root):
        done = [is_done(root, spec, j) for j in jobs]
        lines.append(f"  {stage.name} [{stage.kind}]  {sum(done)}/{len(jobs)} done")
        for job, finished in zip(jobs, done):
            shown = (" ".join(["python", *job_argv(job, root)[1:]]) if stage.kind != "ship"
                     else f"ship {job.argv[1]} -> {job.argv[2]}")
            lines.append(f"    {'done' if finished else 'todo':4} {job.name}: {shown}")
    return "\n".join(lines)
