"""Where worldlab's files live, and the version that wrote them (a leaf: standard library).

    ROOT  the repository (worldlab is installed editable from it)
    DATA  shipped artifacts: checkpoints, samples, results tables
    RUNS  git-ignored artifacts: checkpoints, metrics, executed notebooks

Every room imports these from here, never from the package's `__init__`, so no module
below the top imports the package that imports it.
"""

from __future__ import annotations

import os
from pathlib import Path

VERSION = "0.1.0"
ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
RUNS = ROOT / "runs"


def relative(path) -> str:
    """`path` as a table or a run's record writes it: relative to the repository root (a
    relative path is kept as given)."""
    path = Path(path)
    return os.path.relpath(path, ROOT) if path.is_absolute() else str(path)
