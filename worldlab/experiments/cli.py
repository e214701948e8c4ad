"""`python -m worldlab run SPEC ...`: run experiment specs (docs/experiments.md).

    python -m worldlab run experiments/memory.yaml --dry-run    # the plan and what is done
    python -m worldlab run experiments/memory.yaml --jobs 2     # two jobs of a stage at once
    python -m worldlab run --dry-run                            # check every spec in experiments/
"""

from __future__ import annotations

from pathlib import Path


def _stop_on_sigterm() -> None:
    """SIGTERM ends the run as Ctrl-C does: each running job is stopped before the runner
    exits (a background shell ignores SIGINT, so `kill` is how a user stops a run there)."""
    import signal
    import threading

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def _run(args) -> int:
    from .runner import describe, run_spec
    from .spec import load_spec
    root = Path(args.root)
    paths = args.specs or sorted((root / "experiments").glob("*.yaml"))
    if not paths:
        raise FileNotFoundError(f"no spec given and none in {root / 'experiments'}")
    if not args.specs and not args.dry_run:
        raise ValueError("name the spec(s) to run; without one only --dry-run is allowed")
    slurm = {k: v for k, v in (("partition", args.partition), ("gpus_per_node", args.gpus))
             if v is not None}

    def progress(stage, job, state):
        print(f"[{spec.name}] {stage}/{job}: {state}", flush=True)

    _stop_on_sigterm()
    for path in paths:
        spec = load_spec(path)
        if args.dry_run:
            print(describe(spec, root))
            continue
        try:
            run_spec(spec, root=root, jobs=args.jobs, executor=args.executor, only=args.only,
                     allow_dirty=args.allow_dirty, slurm=slurm, progress=progress)
        except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: the jobs have ended
            print(f"[{spec.name}] stopped ({stop or 'Ctrl-C'}): finished jobs keep their "
                  f"stamps; run the same command again to go on", flush=True)
            return 130
    return 0


def configure_cli(parser) -> None:
    from .runner import EXECUTORS
    parser.add_argument("specs", nargs="*", type=Path, metavar="SPEC",
                        help="experiments/<name>.yaml (with --dry-run, default: every spec)")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the spec(s) and print the plan; run nothing")
    parser.add_argument("--jobs", type=int, default=1,
                        help="jobs of one stage at once (variants x seeds)")
    parser.add_argument("--executor", default="local", choices=EXECUTORS,
                        help="local processes, submitit's local executor, or SLURM")
    parser.add_argument("--only", action="append", default=None, metavar="STAGE",
                        help="run only this stage (repeatable); its inputs must exist")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="ship a preview under runs/experiments/ from a tree with "
                             "uncommitted changes (never under data/)")
    parser.add_argument("--partition", default=None, help="slurm: the partition")
    parser.add_argument("--gpus", type=int, default=None, help="slurm: GPUs per node")
    parser.add_argument("--root", default=".", help="the repository the spec's paths are in")
    parser.set_defaults(func=_run)

