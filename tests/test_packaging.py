"""The conda recipe and pyproject.toml declare the same packages; CI files exist."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# conda-forge names that differ from PyPI's
CONDA_TO_PYPI = {"pytorch": "torch"}
NOT_PYTHON = {"python", "pip", "libusb"}


def _name(req: str) -> str:
    return re.split(r"[<>=!;\[ ]", req.strip(), maxsplit=1)[0].lower()


def _pyproject_packages() -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = meta["dependencies"] + [r for extra in meta["optional-dependencies"].values()
                                   for r in extra]
    # open3d-cpu is the same package as open3d, in a CPU-only wheel
    return {_name(r).replace("open3d-cpu", "open3d") for r in reqs}


def _conda_packages() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    names = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            names |= {_name(p) for p in dep["pip"] if not p.startswith("-")}
        else:
            names.add(CONDA_TO_PYPI.get(_name(dep), _name(dep)))
    return names - NOT_PYTHON


def test_environment_yml_matches_pyproject():
    assert _conda_packages() == _pyproject_packages()


def test_environment_yml_has_no_cuda_pins():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = [d for d in env["dependencies"] if isinstance(d, str)]
    assert not [d for d in deps if "cuda" in d.lower()], "environment.yml must solve on CPU"
    assert env["channels"] == ["conda-forge"]
    assert "python=3.11" in env["dependencies"]


def test_ci_calls_make_test():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert {"runs/", ".venv/"} <= set((ROOT / ".gitignore").read_text().split())
