"""The notebook contract: one literal `parameters` cell, no outputs (tutorials: all of their
outputs, checked by nbval in `make test`), CI keys declared, two-digit course order, metadata
papermill needs."""

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("run_notebooks", ROOT / "ci" / "run_notebooks.py")
run_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_notebooks)

NOTEBOOKS = run_notebooks.notebook_paths(ROOT)


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_there_is_a_course():
    names = [p.name for p in NOTEBOOKS if p.parent.name == "notebooks"]
    assert names and names[0].startswith("00_"), names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_contract(path):
    assert re.match(r"^\d\d_[a-z0-9_]+\.ipynb$", path.name), \
        f"{path.name}: names start with a two-digit number then snake_case"
    nb = _load(path)
    params = run_notebooks.declared_parameters(nb)  # raises unless one literal cell
    assert params, f"{path.name}: the parameters cell declares nothing"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    if path.parent.name == "tutorials":  # outputs kept for the web; nbval re-checks them
        assert all(c.get("execution_count") for c in code), \
            f"{path.name}: a tutorial is committed executed, every cell (tutorials/README.md)"
        assert not any(o.get("output_type") == "error" for c in code for o in c["outputs"]), \
            f"{path.name}: committed with an error output"
        assert path.stat().st_size < 400_000, f"{path.name}: outputs too large for the web"
    else:
        assert not any(c.get("outputs") or c.get("execution_count") for c in code), \
            f"{path.name}: committed with outputs (strip them)"
    ids = [c.get("id") for c in nb["cells"]]  # nbformat 4.5: unique ids (papermill warns)
    assert all(isinstance(i, str) and re.fullmatch(r"[\w-]{1,64}", i) for i in ids), \
        f"{path.name}: every cell needs an id (nbformat.validator.normalize adds them)"
    assert len(set(ids)) == len(ids), f"{path.name}: cell ids repeat"
    assert nb["metadata"].get("kernelspec", {}).get("name") == "worldlab"
    assert "language_info" in nb["metadata"]
    source = "".join("".join(c["source"]) for c in code)
    assert "import worldlab as wl" in source
    assert not re.search(r"\bif\s+CI\b|os\.environ\[.CI.\]|getenv\(.CI.\)", source), \
        f"{path.name}: sizes come from ci/params.yaml, not CI branches"
    # every parameter line carries a help comment for papermill
    cell = run_notebooks.parameters_cells(nb)[0]
    lines = [ln for ln in "".join(cell["source"]).splitlines() if ln.strip()]
    assert all("#" in ln for ln in lines), f"{path.name}: parameters need trailing comments"


def test_every_ci_key_is_declared_somewhere():
    declared = set()
    for path in NOTEBOOKS:
        declared |= set(run_notebooks.declared_parameters(_load(path)))
    profiles = yaml.safe_load((ROOT / "ci" / "params.yaml").read_text())
    for profile, sizes in profiles.items():
        unknown = set(sizes or {}) - declared
        assert not unknown, f"ci/params.yaml[{profile}] keys no notebook declares: {unknown}"


@pytest.mark.parametrize("bad, match", [
    ("x = 1\ny = 2", "exactly one"),
    ("x = some_call()", "must be a literal"),
    ("import os", "name = literal"),
])
def test_contract_checker_rejects(bad, match):
    cells = [{"cell_type": "code", "source": bad, "metadata": {"tags": ["parameters"]}}]
    if match == "exactly one":
        cells = cells * 2
    with pytest.raises(ValueError, match=match):
        run_notebooks.declared_parameters({"cells": cells})


def _plot(title, *names):
    fig = {"data": [{"type": "scatter", "name": n} for n in names],
           "layout": {"title": {"text": title}}}
    return {"output_type": "display_data", "data": {run_notebooks.PLOTLY: fig}}


def test_figures_per_cell_flags_every_cell_with_more_than_one():
    cells = [{"cell_type": "code", "id": "one", "outputs": [_plot("loss", "a")]},
             {"cell_type": "code", "id": "per-engine",
              "outputs": [_plot("doom: depth", "a"), _plot("procedural: depth", "a")]},
             {"cell_type": "code", "id": "stacked",
              "outputs": [_plot("loss", "a"), {"output_type": "stream", "text": "x"},
                          _plot("loss", "a"), _plot("loss", "a")]},
             {"cell_type": "markdown", "id": "text", "source": "# x"}]
    problems = run_notebooks.figures_per_cell({"cells": cells})
    assert [p.split(":")[0] for p in problems] == ["cell per-engine", "cell stacked"]
    assert "3 plotly figures (titled ['loss'])" in problems[1]


OLD_LIVE_CELL = '''import plotly.graph_objects as go
from IPython.display import display
import worldlab as wl
wl.viz.set_renderer()
fig = go.Figure(layout=dict(title="loss (live)"))
fig.add_scatter(x=[], y=[], name="loss")
handle = display(fig, display_id=True)
for step in range(1, 4):
    fig.data[0].x, fig.data[0].y = list(range(step)), list(range(step))
    handle.update(fig)'''
NEW_LIVE_CELL = '''live = wl.viz.LiveLoss("loss (live)", every=1)
callback = live.callback("loss", total=3)
for step in range(1, 4):
    callback({"step": step, "loss": 1.0 / step})'''


def test_figures_per_cell_catches_the_old_live_plot_in_a_real_kernel():
    """The pattern notebooks 02-06 had stacks a copy per update (papermill's kernel client
    keeps every display); wl.viz.LiveLoss leaves one figure with every point."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(OLD_LIVE_CELL, id="old"),
                                         nbformat.v4.new_code_cell(NEW_LIVE_CELL, id="new")])
    nbclient.NotebookClient(nb, kernel_name="worldlab", timeout=120).execute()
    problems = run_notebooks.figures_per_cell(json.loads(nbformat.writes(nb)))
    assert len(problems) == 1 and problems[0].startswith("cell old: ")
    assert len(nb.cells[1].outputs) == 1
    assert nb.cells[1].outputs[0]["data"][run_notebooks.PLOTLY]["data"][0]["x"] == [1, 2, 3]


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.parent.name == "tutorials"],
                         ids=lambda p: p.name)
def test_stored_3d_figures_show_all_they_draw(path):
    """A tutorial's stored scene figures keep every point inside their axes (tutorial 05's
    cache was once drawn outside the ranges fitted to its camera path: empty axes)."""
    assert run_notebooks.scenes_out_of_view(_load(path)) == []


def test_scenes_out_of_view_names_the_trace():
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter3d(x=[0.0, 5.0], y=[0.0, 0.0], z=[0.0, 0.0], name="cache"))
    fig.update_layout(scene=dict(xaxis_range=[-1, 1], yaxis_range=[-1, 1], zaxis_range=[-1, 1]))
    out = {"output_type": "display_data", "data": {run_notebooks.PLOTLY: fig.to_plotly_json()}}
    nb = {"cells": [{"cell_type": "code", "id": "c3d", "outputs": [out]}]}
    assert run_notebooks.scenes_out_of_view(nb) == [
        "cell c3d: trace 'cache' spans x = [0, 5] outside the figure's range [-1, 1]"]
