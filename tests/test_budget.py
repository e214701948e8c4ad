"""What each table row cost to train (`evaluate.budget`): records read from a model's
directory, thread-minutes, the budget stated in words, and bad records named."""

import json

import pytest

from worldlab.evaluate.budget import (budget_rows, model_budget, parse_stated, read_records,
                                      summary)


def _write(path, name, record):
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_text(json.dumps(record))


def test_records_give_steps_seconds_and_thread_minutes(tmp_path):
    _write(tmp_path, "train_run.json", {"steps": 1200, "seconds": 1500.0, "threads": 2,
                                        "device": "cpu", "init": "data/checkpoints/doom64"})
    _write(tmp_path, "distill_run.json", {"steps": 240, "seconds": {"pairs": 60.0,
                                                                    "train": 240.0},
                                          "threads": 1, "device": "cpu"})
    records = read_records(tmp_path)
    assert records["distill_run.json"]["seconds"] == 300.0  # pairs + train
    budget = model_budget(tmp_path, stated="the teacher: 42 min")
    assert budget["recorded_thread_minutes"] == pytest.approx((1500 * 2 + 300) / 60, abs=0.05)
    text = summary(budget)
    assert text.startswith("the teacher: 42 min; ") and "1200 steps, 25.0 min on 2" in text


def test_a_model_without_records_or_directory_says_so(tmp_path):
    assert model_budget(tmp_path) == {"stated": None, "records": {},
                                      "recorded_thread_minutes": None}
    assert summary(model_budget(None)) == "not recorded"
    assert summary(None) == "none"  # repeat-last trains nothing
    rows = budget_rows({"world": model_budget(tmp_path, "2 h"), "repeat": None})
    assert [m for _, m, _ in rows] == ["recorded thread-minutes", "training"]
    assert rows[1][2] == {"world": "2 h", "repeat": "none"}
    assert len(budget_rows({"repeat": None}, words=False)) == 1


@pytest.mark.parametrize("text, match", [("[1, 2]", "JSON object"), ("{oops", "valid JSON"),
                                         ('{"seconds": "long"}', "seconds")])
def test_a_bad_record_is_named_and_left_as_it_was(tmp_path, text, match):
    (tmp_path / "train_run.json").write_text(text)
    with pytest.raises(ValueError, match=match):
        read_records(tmp_path)
    assert (tmp_path / "train_run.json").read_text() == text


def test_stated_budgets_name_a_model_once():
    assert parse_stated(["doom64=2 h 30 min = 9,000 s"], {"doom64"}) == {
        "doom64": "2 h 30 min = 9,000 s"}
    for bad in (["doom64"], ["doom64="], ["proc64=1 h"], ["doom64=1 h", "doom64=2 h"]):
        with pytest.raises(ValueError, match="--budget"):
            parse_stated(bad, {"doom64"})
