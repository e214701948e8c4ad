"""The protocol seam: one list (`evaluate.registry.PROTOCOLS`) drives the full suite, the
`eval --suite` choices, the progress bar and the report. A protocol registered here, at
test time, reaches all of them without another file changing."""

from __future__ import annotations

import json

import pytest

from worldlab.cli import build_parser, main
from worldlab.evaluate import registry
from worldlab.evaluate.full import full_suite
from worldlab.evaluate.full_report import figures, headline_rows
from worldlab.evaluate.suite.base import Protocol

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _echo_run(run):
    """Reads the world it was given: its frame side and chunk length."""
    return {"echo": {"size": run.world.size, "chunk_frames": run.world.chunk_frames}}, {}


def _echo_figures(result: dict) -> list:
    import plotly.graph_objects as go

    fig = go.Figure([go.Bar(x=["size"], y=[result["echo"]["size"]])])
    fig.update_layout(title="echo: the world's frame side")
    return [fig]


ECHO = Protocol("echo", "echo", ("echo",), _echo_run,
                rows=lambda r: [("echo", "frame side (px)", {"world": r["echo"]["size"]})],
                figures=_echo_figures)


@pytest.fixture
def echo(monkeypatch):
    monkeypatch.setattr(registry, "PROTOCOLS", [*registry.PROTOCOLS, ECHO])


def _choices() -> list[str]:
    sub = next(a for a in build_parser("eval")._actions if a.dest == "command")
    return next(a for a in sub.choices["eval"]._actions if a.dest == "suite").choices


def test_the_registry_names_every_protocol_once_and_each_is_a_suite_choice():
    names = registry.names()
    assert names == ["held_out", "runtime", "revisit", "long", "events", "generalisation"]
    assert set(names) <= set(_choices()) and "full" in _choices()
    assert [p.name for p in registry.select(["events", "runtime"])] == ["runtime", "events"]
    with pytest.raises(ValueError, match="'nope'"):
        registry.select(["nope"])
    with pytest.raises(ValueError, match="distinct"):
        registry.select(["runtime", "runtime"])
    with pytest.raises(ValueError, match="identifier"):
        Protocol("two words", "x", ("x",), _echo_run, rows=lambda r: [])


def test_a_result_written_before_protocols_were_recorded_is_read_by_its_keys():
    old = {"runtime": {"world": {"fps": 12.5}}, "long": {}}  # no "protocols" entry
    assert [p.name for p in registry.present(old)] == ["runtime", "long"]
    assert [p.name for p in registry.present({**old, "protocols": ["runtime"]})] == \
        ["runtime"]
    assert headline_rows({"runtime": {"world": {"fps": 12.5}, "repeat": {"fps": 1e4}}}) == \
        [("runtime", "frames/s (world: streaming with its KV cache)", {"world": 12.5})]


def test_a_registered_protocol_reaches_the_choices_the_suite_and_the_report(echo, world):
    assert "echo" in _choices()
    titles = []
    result, strips = full_suite(world, protocols=["echo"], progress=titles.append)
    assert result["protocols"] == ["echo"] and titles == ["echo"] and strips == {}
    assert result["echo"] == {"size": world.size, "chunk_frames": world.chunk_frames}
    assert set(result["seconds"]) == {"echo", "total"}
    rows = headline_rows(result)  # the protocol's rows, then what each model cost to train
    assert rows[0] == ("echo", "frame side (px)", {"world": world.size})
    assert [r[0] for r in rows[1:]] == ["budget", "budget"]
    assert [f.layout.title.text for f in figures(result)] == ["echo: the world's frame side"]


def test_a_protocol_must_write_the_keys_it_declares(monkeypatch, world):
    liar = Protocol("liar", "liar", ("promised",), lambda run: ({"other": 1}, {}),
                    rows=lambda r: [])
    monkeypatch.setattr(registry, "PROTOCOLS", [*registry.PROTOCOLS, liar])
    with pytest.raises(ValueError, match="'liar' wrote \\['other'\\], but declares "
                                         "\\['promised'\\]"):
        full_suite(world, protocols=["liar"])


def test_eval_suite_runs_a_registered_protocol_alone(echo, world_dir, tmp_path, capsys):
    assert main(["eval", "--suite", "echo", "--checkpoint", str(world_dir), "--peer", "none",
                 "--threads", "1", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    saved = json.loads((tmp_path / "echo.json").read_text())["worlds"][world_dir.name]
    size = json.loads((world_dir / "world_config.json").read_text())["data"]["size"]
    assert saved["protocols"] == ["echo"] and saved["echo"]["size"] == size
    assert "frame side (px)" in printed
    page = (tmp_path / "echo.html").read_text()
    assert "frame side (px)" in page and "echo: the world" in page


def test_an_unregistered_name_is_not_a_suite(tmp_path):
    with pytest.raises(SystemExit):
        main(["eval", "--suite", "echo", "--out", str(tmp_path)])
    assert not any(tmp_path.iterdir())
