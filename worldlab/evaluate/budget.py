"""What each row of a table cost to train, stated next to its scores (the fair-peer rule:
a table whose rows had different budgets says so).

    budget = model_budget("data/checkpoints/peer_doom64")   # from its training records
    budget = model_budget("data/checkpoints/doom64", stated="doom64_v1 2 h 30 min, ...")
    rows = budget_rows({"world": budget, "peer": peer_budget, "repeat": None})

A model's directory may hold the records its training wrote: `train_run.json` (`train
world`, `train events`, `train memory`, `train diamond`) and `distill_run.json` (`train
distill`); `train package` ships them beside the weights. A record gives its steps, its
seconds and its threads; thread-minutes (seconds x threads / 60) are what a 2-core
machine pays. A record only covers its own run: a world fine-tuned from another has cost
more, so a world's budget is also stated in words (`eval --suite full --budget NAME=TEXT`,
from the spec that made it), and the row shows both.
"""

from __future__ import annotations

from pathlib import Path

from ..loading import read_json
from .suite.base import Row

RECORDS = ("train_run.json", "distill_run.json")  # the training records a model may ship
NO_TRAINING = "none"  # the budget of a row that trains nothing (repeat-last)


def _seconds(record: dict) -> float:
    """A record's seconds: a number, or {part: seconds} (distillation: pairs and train)."""
    s = record.get("seconds")
    if isinstance(s, dict):
        return float(sum(s.values()))
    if not isinstance(s, (int, float)):
        raise ValueError(f"a training record's seconds must be a number or a dict of "
                         f"numbers, got {s!r}")
    return float(s)


def read_records(path) -> dict:
    """{record file: {steps, seconds, threads, device}} of the records in the directory
    `path` (empty when there are none); a record that is not a JSON object raises
    ValueError naming the file."""
    out = {}
    for name in RECORDS:
        f = Path(path) / name
        if not f.is_file():
            continue
        record = read_json(f, "training record")
        if not isinstance(record, dict):
            raise ValueError(f"{f} must hold a JSON object, got {type(record).__name__}")
        out[name] = {"steps": record.get("steps"), "seconds": _seconds(record),
                     "threads": int(record.get("threads") or 1),
                     "device": record.get("device")}
    return out


def model_budget(path, stated: str | None = None) -> dict:
    """{stated, records, recorded_thread_minutes} of the model at `path` (None: a model
    without a directory)."""
    records = {} if path is None else read_records(path)
    minutes = sum(r["seconds"] * r["threads"] for r in records.values()) / 60.0
    return {"stated": stated or None, "records": records,
            "recorded_thread_minutes": round(minutes, 1) if records else None}


def parse_stated(pairs: list[str], names) -> dict[str, str]:
    """{model name: text} of `--budget NAME=TEXT` pairs; a name not among `names`, a pair
    without '=' or a name given twice raises ValueError naming it."""
    out = {}
    for pair in pairs:
        name, eq, text = pair.partition("=")
        if not eq or not text.strip():
            raise ValueError(f"--budget must be NAME=TEXT, got {pair!r}")
        if name not in names or name in out:
            raise ValueError(f"--budget names a model once, one of {sorted(names)}; got "
                             f"{name!r}")
        out[name] = text.strip()
    return out


def summary(budget: dict | None) -> str:
    if budget is None:
        return NO_TRAINING
    parts = [budget["stated"]] if budget["stated"] else []
    for name, r in budget["records"].items():
        parts.append(f"{name}: {r['steps']} steps, {r['seconds'] / 60:.1f} min on "
                     f"{r['threads']} thread(s) ({r['device']})")
    return "; ".join(parts) or "not recorded"


def budget_rows(budgets: dict, words: bool = True) -> list[Row]:
    """The report's rows for {column: model_budget or None (trains nothing)}: the recorded
    thread-minutes, then (with `words`) the budget in words."""
    rows = [("budget", "recorded thread-minutes",
             {c: None if b is None else b["recorded_thread_minutes"]
              for c, b in budgets.items()})]
    if words:
        rows.append(("budget", "training", {c: summary(b) for c, b in budgets.items()}))
    return rows
