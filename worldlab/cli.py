"""`python -m worldlab <command> ...`: the command-line front end.

Each command lives in the module that does the work; that module defines
`configure_cli(parser)`, which adds its arguments (and sub-commands) and sets
`func=<callable(args) -> int>`. Only the chosen command's module is imported.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "data": ("worldlab.recording", "record episodes from an engine, import real video"),
    "train": ("worldlab.training", "train the autoencoder or the world model"),
    "eval": ("worldlab.evaluate", "score a checkpoint against the engine's ground truth"),
    "play": ("worldlab.play", "play a world headless from a scripted action file"),
    "bench": ("worldlab.bench", "speed benchmarks: engines, model, play"),
}


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
