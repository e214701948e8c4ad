"""The shells of a `WorldSession` (the widget, the scripted CLI, the browser scripts) use its
public surface only, and the widget says what is on screen: labelled screens, a minimap that
follows the trail, numbers as data- attributes for scripts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from worldlab.camera import Action
from worldlab.play import WorldSession

ROOT = Path(__file__).resolve().parents[1]
SHELLS = [ROOT / "worldlab" / "play" / "widgets.py", ROOT / "worldlab" / "play" / "script.py",
          *sorted((ROOT / "scripts").glob("*.py"))]
# the session's internals: its state object, its twin engine, its chunk length by its
# short name; and the world's config (shells ask the session: chunk_frames, has_point_cache)
INTERNAL = {"state", "engine", "f"}

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def chain(node: ast.AST) -> list[str]:
    """a.b.c -> ["a", "b", "c"] (calls and subscripts in between keep their names)."""
    names = []
    while True:
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, (ast.Call, ast.Subscript)):
            node = node.func if isinstance(node, ast.Call) else node.value
        elif isinstance(node, ast.Name):
            return [node.id] + names[::-1]
        else:
            return names[::-1]


def session_reads(path: Path) -> dict[int, str]:
    """Line -> the longest `<...session>.<internal>` read on it: a private name, an
    INTERNAL one, or `.world.config` through a session."""
    bad = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Attribute):
            continue
        names = chain(node)
        for i, name in enumerate(names[:-1]):
            if "session" not in name.lower():
                continue
            nxt = names[i + 1]
            if nxt.startswith("_") or nxt in INTERNAL or names[i + 1:i + 3] == ["world",
                                                                                 "config"]:
                bad[node.lineno] = max(bad.get(node.lineno, ""), ".".join(names), key=len)
    return dict(sorted(bad.items()))


def test_shells_touch_no_internal_of_the_session():
    assert len(SHELLS) > 3
    found = [f"{path.relative_to(ROOT)}:{line}: {read}" for path in SHELLS
             for line, read in session_reads(path).items()]
    assert found == [], "shells must use WorldSession's public surface:\n" + "\n".join(found)


def test_the_scan_finds_what_it_forbids(tmp_path):
    """The scan itself: each kind of internal read is caught, public reads are not."""
    code = ("x = session._open_engine('doom', 0)\ny = self.session.state.seed\n"
            "z = game.session.world.config.memory\nw = session.engine\nv = session.f\n"
            "ok = session.chunk_frames + session.status().step + session.world.size\n")
    (tmp_path / "shell.py").write_text(code)
    assert session_reads(tmp_path / "shell.py") == {
        1: "session._open_engine", 2: "self.session.state.seed",
        3: "game.session.world.config.memory", 4: "session.engine", 5: "session.f"}


def test_the_game_labels_its_screens_and_exposes_numbers_as_data(world):
    from worldlab.play.widgets import SCREEN_LABELS, STATS_ATTRS, NotebookGame

    s = WorldSession(world)
    s.reset(engine="procedural", seed=0)
    game = NotebookGame(s)
    labels = [box.children[0].value for box in game.widget.children[1].children]
    assert labels == [f"<b>{t}</b>" for t in SCREEN_LABELS]  # model | twin | map
    assert game.widget.children[1].children[0].children[1] is game.image
    assert game.widget.children[1].children[1].children[1] is game.twin
    last = game.press("w")
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', game.stats.value))
    assert tuple(attrs) == STATS_ATTRS
    assert int(attrs["step"]) == last.step == s.chunk_frames
    assert float(attrs["chunk-ms"]) > 0 and attrs["slow"] in ("0", "1")
    assert int(attrs["game-ms"]) == round(1e3 * s.chunk_frames / s.frame_rate())
    assert float(attrs["psnr"]) == pytest.approx(last.stats["psnr"], abs=0.006)
    assert int(attrs["cache-chunks"]) == last.stats["cache_chunks"]
    assert "data-kind='ready'" in game.status.value


def test_a_game_without_twin_labels_model_and_map(world):
    from worldlab.play.widgets import SCREEN_LABELS, NotebookGame

    s = WorldSession(world, twin=False)
    s.reset(engine="procedural", seed=0)
    labels = [box.children[0].value
              for box in NotebookGame(s).widget.children[1].children]
    assert labels == [f"<b>{SCREEN_LABELS[0]}</b>", f"<b>{SCREEN_LABELS[2]}</b>"]


def test_the_minimap_follows_the_trail(world):
    from worldlab.play.widgets import MAP_VIEW_M, NotebookGame, TRAIL_TRACE, map_view

    s = WorldSession(world)
    s.reset(engine="procedural", seed=0)
    game = NotebookGame(s)
    game.run_script([Action(forward=0.25)] * (2 * s.chunk_frames))
    trail = game.map.data[TRAIL_TRACE]
    xy = np.stack([trail.x, trail.y], 1)  # (t, 2) metres
    (x0, x1), (y0, y1) = game.map.layout.xaxis.range, game.map.layout.yaxis.range
    assert x1 - x0 == pytest.approx(MAP_VIEW_M) == y1 - y0  # a short walk: the least view
    assert (xy[:, 0] > x0).all() and (xy[:, 0] < x1).all()
    assert (xy[:, 1] > y0).all() and (xy[:, 1] < y1).all()
    far = np.array([[0.0, 0.0], [30.0, -4.0]])  # a long walk: its box plus 2 m
    assert map_view(far) == ([-1.0, 31.0], [-18.0, 14.0])


def test_video_labels_must_sit_inside_the_frame():
    from worldlab.play.script import LABEL_PX, label_bar

    bar = label_bar(64, {0: "model"})
    assert bar.shape == (LABEL_PX, 64, 3) and bar.dtype == np.uint8 and bar.max() > 200
    with pytest.raises(ValueError, match=r"labels must map a column in \[0, 64\) to a str, "
                                         r"got 64: 'twin'"):
        label_bar(64, {64: "twin"})
