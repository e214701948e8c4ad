"""Worlds retired from the tree come back from the repository's history, byte for byte."""
import subprocess
from pathlib import Path

import pytest

from worldlab.pretrained import resolve_checkpoint
from worldlab.retired import RETIRED, how_to_restore, restore

ROOT = Path(__file__).resolve().parents[1]


def _git(repo: Path, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A repository whose first commit held data/checkpoints/old (a file and a folder) and
    whose second retired it."""
    world = tmp_path / "data" / "checkpoints" / "old"
    (world / "world").mkdir(parents=True)
    (world / "world_config.json").write_text('{"preset": "tiny"}')
    (world / "world" / "weights.bin").write_bytes(bytes(range(256)) * 64)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "a world")
    held = _git(tmp_path, "rev-parse", "HEAD")
    _git(tmp_path, "rm", "-rq", "data/checkpoints/old")
    _git(tmp_path, "commit", "-qm", "retired")
    return tmp_path, {"old": (held, "a world")}


def test_restore_brings_a_retired_world_back_byte_for_byte(repo):
    root, registry = repo
    dest = restore("old", root, registry)
    assert dest == root / "data" / "checkpoints" / "old"
    assert (dest / "world" / "weights.bin").read_bytes() == bytes(range(256)) * 64
    assert (dest / "world_config.json").read_text() == '{"preset": "tiny"}'
    assert [p.name for p in dest.parent.iterdir()] == ["old"]  # no temporary left behind
    (dest / "world_config.json").write_text("{}")  # a world that is there is left alone
    assert restore("old", root, registry) == dest
    assert (dest / "world_config.json").read_text() == "{}"


def test_restore_names_an_unknown_world_and_a_missing_commit(repo):
    root, registry = repo
    with pytest.raises(ValueError, match="no retired world 'new'; retired: old"):
        restore("new", root, registry)
    gone = {"old": ("0" * 40, "a world")}
    with pytest.raises(FileNotFoundError, match="does not hold commit 000000000000.*shallow"):
        restore("old", root, gone)
    assert not (root / "data" / "checkpoints" / "old").exists()  # nothing written


@pytest.mark.parametrize("name", sorted(RETIRED))
def test_a_missing_retired_world_says_how_to_restore_it(name):
    assert f"checkpoints restore {name}` brings it back" in how_to_restore(
        ROOT / "data" / "checkpoints" / name)
    assert how_to_restore(ROOT / "data" / "checkpoints" / "doom64") is None  # in the tree
    if not (ROOT / "data" / "checkpoints" / name).exists():  # as in a fresh clone
        with pytest.raises(FileNotFoundError, match=f"checkpoints restore {name}` brings"):
            resolve_checkpoint(f"data/checkpoints/{name}")


def test_retired_worlds_are_ignored_so_a_restored_one_leaves_the_tree_clean():
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert all(f"/data/checkpoints/{name}/" in ignored for name in RETIRED)
