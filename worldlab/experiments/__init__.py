"""Experiments as data: a spec (`experiments/<name>.yaml`) names the stages that make a
shipped table (record, encode, train variants x seeds, package, evaluate, table, ship), and
one runner executes it, resumes it and ships its JSON with the spec, its hash and a clean
commit (docs/experiments.md). `documents` renders the tables of README.md and data/README.md
from that JSON.

    from worldlab.experiments import describe, run_spec
    print(describe("experiments/memory.yaml"))   # the plan, and what is done
    run_spec("experiments/memory.yaml", jobs=2)
"""

from .runner import EXECUTORS, RunError, describe, run_spec
from .spec import Spec, SpecError, load_spec

__all__ = ["EXECUTORS", "RunError", "describe", "Spec", "SpecError", "load_spec", "run_spec"]
