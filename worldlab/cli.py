"""`python -m worldlab <command> ...`: the command-line front end.

Each command lives in the room that does the work; that module defines
`configure_cli(parser)`, which adds its arguments (and sub-commands) and sets
`func=<callable(args) -> int>`. Only the chosen command's module is imported. `bench` is
spelled here, the one place that sits above every room: its benchmarks live in the rooms
they measure (`BENCHMARKS`).

`main` raises what a command raises (tests and notebooks call it); `run`, the shell's entry
(`python -m worldlab`, the `worldlab` script), prints a bad input's ValueError (or a missing
file's FileNotFoundError) as one line naming the value, exit status 2 (WORLDLAB_TRACEBACK=1
shows the traceback as well).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

COMMANDS: dict[str, tuple[str, str]] = {
    "data": ("worldlab.episodes.cli", "record episodes from an engine, import real video"),
    "train": ("worldlab.train.cli", "train the autoencoder or the world model"),
    "eval": ("worldlab.evaluate.cli", "score a checkpoint against the engine's ground truth"),
    "play": ("worldlab.play.script", "play a world headless from a scripted action file"),
    "bench": ("worldlab.cli", "speed benchmarks: engines, model, play, train, distill, "
                              "profile, inference, memory"),
    "table": ("worldlab.evaluate.tables", "build a shipped table's JSON from evaluation outputs"),
    "run": ("worldlab.experiments.cli", "run an experiment spec (experiments/*.yaml) stage by "
                                        "stage"),
    "results": ("worldlab.experiments.documents", "render the documents' result tables from "
                                            "data/results/*.json, or check them"),
    "checkpoints": ("worldlab.retired", "worlds retired from the tree: list them, restore one "
                                        "from the repository's history"),
}

# name -> (module, function(**options) -> JSON-able dict); a benchmark takes the options
# its function has parameters for (steps, checkpoint, preset, device, ...), and no other
BENCHMARKS: dict[str, tuple[str, str]] = {
    "engines": ("worldlab.evaluate.bench", "bench_engines"),
    "model": ("worldlab.evaluate.bench", "bench_model"),
    "play": ("worldlab.play.script", "bench_play"),
    "train": ("worldlab.evaluate.training_speed", "bench_train"),
    "profile": ("worldlab.evaluate.profile", "bench_profile"),
    "inference": ("worldlab.evaluate.switches", "bench_inference"),
    "distill": ("worldlab.play.distill_bench", "bench_distill"),
    "memory": ("worldlab.evaluate.bench", "bench_memory"),
}
OPTIONS = ("steps", "checkpoint", "preset", "device", "size", "sample_steps", "data",
           "latents", "episodes", "compile", "model", "chunks", "twin",
           "paint")  # passed on when given


def _bench(args) -> int:
    import inspect

    from .atomic import atomic_write_json
    from .threads import use_threads
    from .train.cli import parse_overrides

    use_threads(args.threads)
    module, name = BENCHMARKS[args.what]
    fn = getattr(importlib.import_module(module), name)
    given = {k: getattr(args, k) for k in OPTIONS if getattr(args, k) not in (None, False)}
    if args.set:
        given["overrides"] = parse_overrides(args.set)
    extra = sorted(set(given) - set(inspect.signature(fn).parameters))
    if extra:
        flag = "set" if extra[0] == "overrides" else extra[0].replace("_", "-")
        raise ValueError(f"bench {args.what} does not take --{flag}")
    data = fn(**given)
    print(f"wrote {atomic_write_json(Path(args.out) / f'{args.what}.json', data)}")
    return 0


def configure_cli(parser) -> None:
    """The `bench` command."""
    from .paths import RUNS

    parser.add_argument("what", choices=list(BENCHMARKS))
    parser.add_argument("--steps", type=int, default=None,
                        help="steps to time (default: the benchmark's own, 300 for most)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--checkpoint", default=None,
                        help="world directory (model, play, profile, inference, distill; default: "
                             "the shipped world)")
    parser.add_argument("--preset", default=None,
                        help="train: the preset to time (default small); model: time a "
                             "fresh world of this preset instead of a checkpoint")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION__FIELD=VALUE",
                        help="train, model: config override of the preset (repeatable)")
    parser.add_argument("--device", default=None, help="train, model, inference: auto | cpu | "
                                                           "cuda")
    parser.add_argument("--size", type=int, default=None,
                        help="model: frame size of the fresh world (with --preset)")
    parser.add_argument("--sample-steps", type=int, default=None,
                        help="model, memory: sampling steps per chunk (default: the "
                             "config's)")
    parser.add_argument("--data", default=None,
                        help="train: episode store (default: recorded under runs/bench)")
    parser.add_argument("--latents", default=None,
                        help="train: latent cache of --data (missing ones are encoded)")
    parser.add_argument("--episodes", type=int, default=None,
                        help="train: episodes of --data to use, or to record (default 64); "
                             "distill, inference: held-out episodes (default 8, 4)")
    parser.add_argument("--compile", action="store_true",
                        help="train: also time torch.compile")
    parser.add_argument("--model", action="append", default=None,
                        metavar="NAME=DIR[,steps=N][,decoder=fast][,quantize=int8]",
                        help="distill: a model to compare (repeatable; default: the "
                             "checkpoint at 16, 32 and 4 steps); memory: NAME=DIR of a "
                             "world with memory (repeatable; the first is the baseline)")
    parser.add_argument("--chunks", type=int, default=None,
                        help="profile, inference: chunks timed after the warm-up; "
                             "memory: chunks streamed (default 100)")
    parser.add_argument("--twin", action="store_true",
                        help="profile: step the engine beside the world")
    parser.add_argument("--paint", action="store_true",
                        help="play: the world's own 3D cache paints what it has seen (as "
                             "`play` does for a world with a depth head)")
    parser.add_argument("--out", default=str(RUNS / "bench"))
    parser.set_defaults(func=_bench)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m worldlab", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", metavar="command")
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        if name == command:
            importlib.import_module(module).configure_cli(p)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    if command is not None and command not in COMMANDS:
        print(f"unknown command {command!r}; expected one of {sorted(COMMANDS)}",
              file=sys.stderr)
        return 2
    args = build_parser(command).parse_args(argv)
    if not getattr(args, "func", None):
        build_parser(command).print_help()
        return 0 if command is None else 2
    return int(args.func(args) or 0)


def run(argv: list[str] | None = None) -> int:
    """`main` for a shell: a bad input's ValueError, or a missing file's FileNotFoundError
    (every check here raises one that names the value or the path), is one line on stderr
    and exit status 2, not a traceback."""
    try:
        return main(argv)
    except (ValueError, FileNotFoundError) as e:
        if os.environ.get("WORLDLAB_TRACEBACK"):
            raise
        print(f"python -m worldlab: error: {e}\n(WORLDLAB_TRACEBACK=1 shows where it was "
              f"raised)", file=sys.stderr)
        return 2
