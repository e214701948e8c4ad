"""worldlab: a research workbench for playable, long-horizon video world models.

    import worldlab as wl
    wl.camera.straight(10)          # conventions, poses, rays, actions, trajectories
    wl.make_config("tiny")          # configs and presets

Submodules load on first use, so `import worldlab` stays fast and torch is imported only
by the parts that need it.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from . import camera, config
from .config import make_config

__version__ = "0.1.0"

ROOT = Path(__file__).resolve().parents[1]  # the repository (editable install)
DATA = ROOT / "data"  # shipped checkpoints and samples
RUNS = ROOT / "runs"  # git-ignored artifacts: checkpoints, metrics, executed notebooks

_LAZY = ("viz", "engines", "episodes", "recording", "realestate", "autoencoder", "model",
         "memory", "metrics", "sampler", "training", "checkpoints", "pretrained", "distill",
         "evaluate", "play", "cli", "bench", "textenc")


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'worldlab' has no attribute {name!r}")


__all__ = ["camera", "config", "make_config", "ROOT", "DATA", "RUNS", *_LAZY]
