"""The memory issues' bars, in one place for `table memory`, `table recall` and notebook 04."""

from __future__ import annotations

import json

import pytest

from worldlab.evaluate.memory_bars import (MEMORY_BARS, RECALL_BARS, Bar, bar_rows,
                                           recall_bar_values)
from worldlab.paths import DATA


def test_bars_judge_values_on_their_side_of_the_threshold():
    assert Bar("x", ">=", 2.0).met(2.0) and not Bar("x", ">=", 2.0).met(1.99)
    assert Bar("x", "<=", 1.1).met(1.1) and not Bar("x", "<=", 1.1).met(1.11)
    assert Bar("x", ">=", -0.3).need == ">= -0.3"
    assert Bar("x", ">", 1.0).met(1.01) and not Bar("x", ">", 1.0).met(1.0)
    with pytest.raises(ValueError, match="'<'"):
        Bar("x", "<", 1.0)


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


def _row(psnr, tokens=0.0, ms=100.0, paired=None):
    return {"recall_psnr": psnr, "memory_tokens_per_frame": tokens, "ms_per_chunk": ms,
            **({"paired_vs_none": paired} if paired else {})}


def test_recall_bars_judge_the_best_tokens_own_depth_and_time():
    variants = {"none": _row(18.0), "retrieval": _row(20.5, 64.0, 120.0, {"mean": 2.5,
                                                                          "lo": 1.2, "hi": 3}),
                "tokens": _row(20.2, 8.0, 110.0, {"mean": 2.2, "lo": 0.9, "hi": 3}),
                "cache3d_own": _row(19.0, 0.0, 160.0, {"mean": 1.0, "lo": 0.1, "hi": 2}),
                "cache3d_oracle": _row(20.5, 0.0, 140.0, {"mean": 2.5, "lo": 1.5, "hi": 3})}
    values = recall_bar_values(variants, "retrieval")
    assert values == pytest.approx({
        "best_minus_none_recall_db": 2.5, "best_minus_none_recall_lo_db": 1.2,
        "tokens_fewer_than_retrieval_x": 8.0, "tokens_minus_retrieval_recall_db": -0.3,
        "own_minus_oracle_cache_recall_db": -1.5, "ms_per_chunk_over_none_max": 1.6})
    met = {r["bar"]: r["met"] for r in bar_rows(values, RECALL_BARS)}
    assert [met[RECALL_BARS[k].what] for k in RECALL_BARS] == [True, True, True, True, False,
                                                               False]
    alone = recall_bar_values({"none": _row(18.0), "sink": _row(18.1, 2.0, 100.0, {
        "mean": 0.1, "lo": -0.2, "hi": 0.3})}, "sink")  # no tokens, no caches trained
    assert set(alone) == {"best_minus_none_recall_db", "best_minus_none_recall_lo_db",
                          "ms_per_chunk_over_none_max"}
