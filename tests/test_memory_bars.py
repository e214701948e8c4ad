"""The memory issue's bars, in one place for `table memory` and notebook 04."""

from __future__ import annotations

import json

import pytest

from worldlab.evaluate.memory_bars import MEMORY_BARS, Bar, bar_rows
from worldlab.paths import DATA


def test_bars_judge_values_on_their_side_of_the_threshold():
    assert Bar("x", ">=", 2.0).met(2.0) and not Bar("x", ">=", 2.0).met(1.99)
    assert Bar("x", "<=", 1.1).met(1.1) and not Bar("x", "<=", 1.1).met(1.11)
    assert Bar("x", ">=", -0.3).need == ">= -0.3"
    with pytest.raises(ValueError, match="'>'"):
        Bar("x", ">", 1.0)


def test_rows_of_the_shipped_memory_table_leave_out_bars_it_lacks():
    shipped = json.loads((DATA / "results" / "memory.json").read_text())["bars"]
    rows = {r["bar"]: r for r in bar_rows(shipped)}
    assert len(rows) == len([k for k in MEMORY_BARS if k in shipped]) == 7
    best = rows[MEMORY_BARS["best_minus_none_return_db"].what]
    assert best == {"bar": "return PSNR: best - none (dB)", "value": 0.28, "needs": ">= 2",
                    "met": False}  # +0.28 dB, the shipped retrieval over none
    assert rows[MEMORY_BARS["tokens_fewer_than_retrieval_x"].what]["met"]  # exactly 8x
    partial = {"best_minus_none_return_db": 2.5, "cost_ratio_max": 1.0}  # nothing else run
    assert [(r["value"], r["met"]) for r in bar_rows(partial)] == [(2.5, True), (1.0, True)]
