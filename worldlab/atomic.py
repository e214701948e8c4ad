"""Atomic writes: a file or a directory appears whole at its final path or not at all.

Everything is written next to its final place (a hidden temporary file or directory in the
same folder) and renamed into place with `os.replace`, so a crash mid-write leaves the
previous version (or nothing) and no temporary behind. Results get the usual permissions
(0666 / 0777 minus the process umask), not the private 0600 / 0700 of `tempfile`.

A writer killed outright (SIGKILL) cannot clean up: its temporary stays. Each temporary's
name carries its writer's process id (`.<name>.<pid>-<random>.tmp`, `.tmp-<name>-<pid>-
<random>`), so `remove_dead_temps` can tell a dead writer's leftovers from a live writer's
work in progress (process ids are per machine: a store shared over NFS with writers on other
machines must not be swept); `atomic_dir` sweeps those of its own target before it writes.

A leaf module (standard library only): episode stores, benchmarks and checkpoints all use
it without importing each other's dependencies.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read the process umask (os.umask can only be read by setting it)


def atomic_write(path: Path, write) -> None:
    """Call write(binary file object) on a temp file next to `path`, then replace `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}-",
                               suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode()))


def atomic_write_json(path: Path, data) -> Path:
    """`data` as indented JSON at `path`, atomically; returns the path."""
    atomic_write_text(path, json.dumps(data, indent=2))
    return Path(path)


def atomic_dir(final: Path, write) -> Path:
    """Call write(tmp_dir), then rename tmp_dir to `final` (replacing it); clean up on error."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_temps(final.parent, final.name)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-{os.getpid()}-", dir=final.parent))
    try:
        os.chmod(tmp, 0o777 & ~_UMASK)
        write(tmp)
        if final.exists():  # os.replace cannot replace a non-empty directory: move it aside
            old = Path(tempfile.mkdtemp(prefix=f".old-{final.name}-", dir=final.parent))
            os.replace(final, old / final.name)
            os.replace(tmp, final)
            shutil.rmtree(old)
        else:
            os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


# ----------------------------------------------------------------------------------------
# What killed writers left
# ----------------------------------------------------------------------------------------

_TEMP_FILE = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)-[A-Za-z0-9_]+\.tmp$")
_TEMP_DIR = re.compile(r"^\.tmp-(?P<name>.+)-(?P<pid>\d+)-[A-Za-z0-9_]+$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_dead_temps(folder: Path, name: str | None = None) -> list[Path]:
    """Remove the temporaries of `atomic_write` and `atomic_dir` in `folder` (for target
    `name` only, if given) whose writer process is gone; returns what was removed."""
    folder = Path(folder)
    removed = []
    for path in folder.glob(".*") if folder.is_dir() else ():
        match = _TEMP_FILE.match(path.name) or _TEMP_DIR.match(path.name)
        if not match or (name is not None and match["name"] != name):
            continue
        if _alive(int(match["pid"])):
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed
