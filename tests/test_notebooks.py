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
