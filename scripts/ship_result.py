"""Copy a benchmark's JSON into data/results/ with where it came from
(`evaluate.report.provenance`: command, commit, uncommitted changes, date).

    python scripts/ship_result.py runs/bench/distill.json data/results/distill.json \
        "bash scripts/train_students.sh && bash scripts/bench_students.sh"
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from worldlab.atomic import atomic_write_json
from worldlab.evaluate.report import provenance


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="the JSON a benchmark wrote under runs/")
    ap.add_argument("target", type=Path, help="where it is shipped, under data/results/")
    ap.add_argument("command", help="the command that reproduces it")
    args = ap.parse_args(argv)
    data = {**json.loads(args.source.read_text()), **provenance(args.command)}
    print("wrote", atomic_write_json(args.target, data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
