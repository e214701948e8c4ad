"""Where the full suite finds its probes and its peer baseline by default: shipped beside
the worlds under `data/checkpoints/` (each small, trained here, safetensors + JSON).

    data/checkpoints/probes/<engine>/   `train.probes.train_probes` output (kinds, motion,
                                        probes.json with their held-out accuracy)
    data/checkpoints/peer_<world>/      the DIAMOND-style peer trained on that world's data
                                        (`train diamond`), with its train_run.json

An explicit directory replaces the default; a missing default probe set is an error that
says how to train one, a missing default peer means the tables have no peer column (a
retired one, `worldlab.retired`, is named with the command that restores it).
"""

from __future__ import annotations

from pathlib import Path

from ..paths import DATA
from ..retired import how_to_restore
from ..train.probes import Probes, load_probes
from .peer import load_peer

CHECKPOINTS = DATA / "checkpoints"


def probes_dir(engine: str) -> Path:
    return CHECKPOINTS / "probes" / engine


def peer_dir(world) -> Path:
    """The shipped peer of a world: `peer_<name of the world's directory>`."""
    name = Path(world.path).name if world.path is not None else ""
    return CHECKPOINTS / f"peer_{name}"


def load_shipped_probes(engine: str, path=None) -> Probes:
    path = Path(path) if path else probes_dir(engine)
    if not (path / "probes.json").is_file():
        raise ValueError(f"no probes at {path} (expected probes.json, kinds/, motion/); "
                         f"train them with `python -m worldlab train probes --engine "
                         f"{engine} --out {path}`")
    return load_probes(path)


def load_shipped_peer(world, path=None):
    """The peer predictor at `path`, else the world's shipped one, else None."""
    if path:
        return load_peer(path, chunk_frames=world.chunk_frames)
    default = peer_dir(world)
    if default.is_dir():
        return load_peer(default, chunk_frames=world.chunk_frames)
    if (restore := how_to_restore(default)) is not None:
        print(f"[peer] no peer column: {restore}")
    return None
