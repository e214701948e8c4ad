"""The ship stage: a JSON a stage wrote under runs/ goes to data/results/ with where it came
from (the spec, its hash, the command, a clean commit, the date), and its extra files (strips)
beside it. A tree with uncommitted changes ships only a preview under runs/experiments/, and
a JSON holding an absolute path is refused: a result must re-run anywhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..atomic import atomic_write_bytes, atomic_write_json
from .spec import Spec


RESULTS = "data/results"  # where shipped tables live (their own changes are not "dirty")


class ShipError(ValueError):
    pass


def git(root: Path, *args: str) -> str:
    import subprocess
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def dirty(root: Path) -> bool:
    """Tracked files differ from the commit (untracked and ignored files do not count, nor
    the shipped results themselves: a spec that ships two files, or two specs run one after
    the other, measure with the same code)."""
    return bool(git(root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                    f":!{RESULTS}"))


def relative_paths(data, root: Path, where: str = "$"):
    """`data` with every absolute path under `root` made relative; any other absolute path
    raises ShipError naming where it sits."""
    if isinstance(data, dict):
        return {k: relative_paths(v, root, f"{where}.{k}") for k, v in data.items()}
    if isinstance(data, list):
        return [relative_paths(v, root, f"{where}[{i}]") for i, v in enumerate(data)]
    if isinstance(data, str) and os.path.isabs(data) and len(data) > 1 and " " not in data:
        resolved = Path(data).resolve()
        if resolved == root or root in resolved.parents:
            return resolved.relative_to(root).as_posix()
        raise ShipError(f"{where} holds the absolute path {data}: a shipped result names "
                        f"paths relative to the repository")
    return data


def provenance(spec: Spec, root: Path) -> dict:
    import datetime
    rel = spec.path.resolve().relative_to(root).as_posix()
    return {"spec": rel, "spec_hash": spec.hash, "command": f"python -m worldlab run {rel}",
            "commit": git(root, "rev-parse", "HEAD") or None,
            "uncommitted_changes": dirty(root),
            "measured": datetime.date.today().isoformat()}


def _read(root: Path, source: str) -> dict:
    data = json.loads((root / source).read_text())
    if not isinstance(data, dict):
        raise ShipError(f"{source}: expected a JSON object, got {type(data).__name__}")
    return data


def ship(spec: Spec, root: Path, source: str | dict, target: str, files: dict[str, str],
         allow_dirty: bool = False, made_at: dict | None = None) -> list[Path]:
    """Write `source` (+ provenance) to `target` and copy `files`; returns what it wrote.
    A mapping `source` (row name -> JSON) ships as {"rows": {name: that JSON}}. `made_at`
    (the runner's stamps: each job's commit) is recorded as `stages`, so a result whose jobs
    ran at other commits than the ship says so; a job that ran on a dirty tree refuses.
    With uncommitted changes it refuses, or with `allow_dirty` writes a preview under
    runs/experiments/<name>/preview/ instead."""
    root = root.resolve()
    meta = provenance(spec, root)
    if meta["uncommitted_changes"] and not allow_dirty:
        raise ShipError(f"{spec.name}: the tree has uncommitted changes to tracked files; "
                        f"commit them and run again (a shipped number names a commit that "
                        f"re-makes it), or --allow-dirty for a preview under runs/")
    if meta["commit"] is None and not allow_dirty:
        raise ShipError(f"{spec.name}: {root} is not a git repository: nothing names the "
                        f"code that made the result")
    made_at = made_at or {}
    stained = [job for job, m in made_at.items() if m.get("uncommitted_changes")]
    if stained and not allow_dirty:
        raise ShipError(f"{spec.name}: {', '.join(stained)} ran with uncommitted changes; run "
                        f"them again from a commit (delete their stamps under "
                        f"runs/experiments/{spec.name}/)")
    data = ({"rows": {name: _read(root, path) for name, path in source.items()}}
            if isinstance(source, dict) else _read(root, source))
    data = relative_paths(data, root)
    for key in meta:
        data.pop(key, None)  # an earlier provenance, e.g. of a bench output, is replaced
    data.pop("stages", None)
    out = {**({"title": spec.title} if spec.title else {}), **data, **meta,
           **({"stages": made_at} if made_at else {})}
    moved = lambda p: (root / "runs" / "experiments" / spec.name / "preview" / Path(p).name  # noqa: E731
                       if meta["uncommitted_changes"] else root / p)
    written = [atomic_write_json(moved(target), out)]
    for src, dst in files.items():
        atomic_write_bytes(moved(dst), (root / src).read_bytes())
        written.append(moved(dst))
    return written
