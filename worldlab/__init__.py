"""worldlab: a research workbench for playable, long-horizon video world models.

    import worldlab as wl
    wl.camera.straight(10)          # conventions, poses, rays, actions, trajectories
    wl.make_config("tiny")          # configs and presets

The rooms, in the order data flows (a room imports only rooms before it):

    camera, config, atomic, loading, metrics, paths, retired,       leaves
    threads, viz
    engines      ground-truth worlds (procedural, DOOM) and scripted players
    episodes     the episode schema and store, recording, datasets
    model        autoencoder, chunk-causal DiT, conditioning, text, sampler
    memory       what carries the past beyond the KV window (3D cache, ...)
    pretrained   a packaged world on disk
    train        the loop, losses, checkpoints, the recipes
    evaluate     protocols against the engine, baselines, benchmarks, reports
    play         a live session and its shells (widget, scripted play)
    cli          `python -m worldlab data|train|eval|play|bench|table|run|results|checkpoints`
    experiments  specs of the shipped tables, their runner, the documents' rendered tables

Rooms load on first use, so `import worldlab` stays fast and torch is imported only by the
parts that need it. `docs/design.md` is the design.
"""

from __future__ import annotations

import importlib

from . import camera, config
from .config import make_config
from .paths import DATA, ROOT, RUNS, VERSION

__version__ = VERSION

_LAZY = ("atomic", "loading", "metrics", "paths", "retired", "threads", "viz", "engines",
         "episodes", "model", "memory", "pretrained", "train", "evaluate", "play", "cli",
         "experiments")  # every module and room


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'worldlab' has no attribute {name!r}")


__all__ = ["camera", "config", "make_config", "ROOT", "DATA", "RUNS", *_LAZY]
