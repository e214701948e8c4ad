"""Worlds retired from the tree, and bringing one back from the repository's history.

Every world a clone checks out costs its size, and every retrained world adds its size to
the history a clone downloads. The tree ships only the worlds a notebook, a test or the
everyday commands read (data/README.md lists them); a world that only an older table or a
spec's starting point needs leaves it. Its tables keep their numbers (each names the commit
it was measured at, which holds the world), and the world comes back byte for byte from the
history every full clone already holds. Nothing is downloaded:

    python -m worldlab checkpoints list
    python -m worldlab checkpoints restore doom64_v1     # -> data/checkpoints/doom64_v1/

A restored world is ignored by git (.gitignore), so a spec that reads it still ships from a
clean tree; the specs that start from one restore it in their first stage.
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from .paths import ROOT

# name -> (a commit whose tree holds data/checkpoints/<name>, what it is and who reads it)
RETIRED: dict[str, tuple[str, str]] = {
    "doom64_v1": ("ca045d8d8be0eb7dd0ae99537c9d87d8423b4c56",
                  "the wave-1 world (MAP01's player start): the start of doom64_teacher "
                  "(experiments/level_world.yaml), wide_latents.yaml and autoencoder_4x.yaml; "
                  "scored in eval_quick_doom64_v1.json and autoencoder_doom64_v1.json"),
    "peer_proc64": ("ca045d8d8be0eb7dd0ae99537c9d87d8423b4c56",
                    "the DIAMOND-style peer of the procedural engine, scored in "
                    "benchmark.json (experiments/benchmark.yaml trains it again)"),
}


def checkpoint_dir(name: str, root: Path = ROOT) -> Path:
    return root / "data" / "checkpoints" / name


def restore(name: str, root: Path = ROOT, registry: dict | None = None) -> Path:
    """data/checkpoints/<name> written back from the commit that holds it; a world already
    there is left as it is. A name that is not retired, a missing git or a history without
    the commit (a shallow clone) raises an error naming it, and writes nothing."""
    registry = RETIRED if registry is None else registry
    if name not in registry:
        raise ValueError(f"no retired world {name!r}; retired: {', '.join(sorted(registry))}")
    commit = registry[name][0]
    dest = checkpoint_dir(name, root)
    if dest.is_dir() and any(dest.iterdir()):
        return dest
    archive = _archive(root, commit, f"data/checkpoints/{name}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{name}."))
    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        shutil.rmtree(dest, ignore_errors=True)  # an empty directory left by someone
        os.replace(tmp / "data" / "checkpoints" / name, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _archive(root: Path, commit: str, path: str) -> bytes:
    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True)

    if shutil.which("git") is None:
        raise FileNotFoundError("restoring a retired world needs git, and none is on PATH")
    if git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        raise FileNotFoundError(f"the history of {root} does not hold commit {commit[:12]}, "
                                f"which holds {path} (a shallow clone? `git fetch "
                                f"--unshallow` fetches the rest)")
    out = git("archive", "--format=tar", commit, path)
    if out.returncode != 0:
        raise FileNotFoundError(f"commit {commit[:12]} does not hold {path}: "
                                f"{out.stderr.decode().strip()}")
    return out.stdout


def how_to_restore(path: Path) -> str | None:
    """What to run for a missing data/checkpoints/<name> that was retired, else None."""
    parts = Path(path).parts
    if len(parts) >= 3 and parts[-3:-1] == ("data", "checkpoints") and parts[-1] in RETIRED:
        return (f"{parts[-1]} was retired from the tree to keep clones small (worldlab/"
                f"retired.py): `python -m worldlab checkpoints restore {parts[-1]}` brings it "
                f"back from the repository's history")
    return None


def configure_cli(p) -> None:
    p.add_argument("action", choices=("list", "restore"))
    p.add_argument("name", nargs="?", help="restore: the retired world")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    if args.action == "list":
        for name, (commit, what) in sorted(RETIRED.items()):
            there = "restored" if checkpoint_dir(name).is_dir() else f"at {commit[:7]}"
            print(f"{name:12s} {there:9s} {what}")
        return 0
    if args.name is None:
        raise ValueError(f"checkpoints restore needs a name: one of {', '.join(RETIRED)}")
    print(f"restored {restore(args.name)}")
    return 0
