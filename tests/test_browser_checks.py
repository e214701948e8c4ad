"""make test's browser checks (ci/browser_checks.py) say why they skip where they cannot run,
and stop with an error naming the missing report where they can."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_runner():
    spec = importlib.util.spec_from_file_location("browser_checks",
                                                  ROOT / "ci" / "browser_checks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_chromium_the_checks_are_skipped_with_the_reason(tmp_path, capsys):
    runner = load_runner()
    runner.CHROMIUM = tmp_path / "no-chromium"
    assert runner.main(["--report", str(tmp_path / "full.html")]) == 0
    out = capsys.readouterr().out
    assert f"skipped the browser checks (play, HTML report): no Chromium at {tmp_path}" in out
    assert "apt-get install -y chromium" in out


def test_a_missing_report_is_an_error_that_names_it(tmp_path, capsys):
    runner = load_runner()
    if runner.missing():
        pytest.skip(f"the browser checks cannot run here: {runner.missing()}")
    assert runner.main(["--report", str(tmp_path / "full.html")]) == 1
    assert f"no report at {tmp_path / 'full.html'}" in capsys.readouterr().out
