"""The episode store under hostile use: concurrent writer processes, malformed index files,
and writers killed with SIGKILL mid-write (see the module docstring of `episodes.store`)."""

import hashlib
import itertools
import json
import multiprocessing
import os
import random
import signal
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_episodes import make_episode
from worldlab.episodes import EpisodeError, EpisodeStore
from worldlab.episodes.schema import ID_RE

FORK = multiprocessing.get_context("fork")  # children inherit the imports: no 2 s restart


def snapshot(root: Path) -> dict[str, str]:
    """name -> sha256 of every file under root: 'nothing changed on disk' made checkable."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------------------
# Concurrent writers
# ----------------------------------------------------------------------------------------


def _write_some(root: str, ids: list, seeds: list[int], start) -> None:
    store = EpisodeStore(root)
    start.wait()  # all writers begin together, so their writes interleave
    for episode_id, seed in zip(ids, seeds):
        store.write(make_episode(t=6, seed=seed), episode_id)


@pytest.mark.parametrize("automatic_ids", [True, False])
def test_concurrent_writers_lose_nothing(tmp_path, automatic_ids):
    writers, each = 3, 4
    start = FORK.Barrier(writers)
    procs = []
    for w in range(writers):
        seeds = [w * each + k for k in range(each)]
        ids = [None] * each if automatic_ids else [f"w{w}-{k}" for k in range(each)]
        procs.append(FORK.Process(target=_write_some, args=(str(tmp_path), ids, seeds, start)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * writers
    store = EpisodeStore(tmp_path)
    n = writers * each
    assert len(store.ids()) == len(set(store.ids())) == n
    assert sorted(store.index) == store.ids()
    if automatic_ids:
        assert store.ids() == [f"{i:06d}" for i in range(n)]
    assert sorted(store.index[i]["seed"] for i in store.ids()) == list(range(n))
    assert store.validate_all() == {}


# ----------------------------------------------------------------------------------------
# Malformed index.json: a clear EpisodeError, and the directory exactly as it was
# ----------------------------------------------------------------------------------------

GOOD_ENTRY = {"id": "a", "frames": 6, "size": [8, 8], "events": []}
MALFORMED = {
    "episodes is a number": json.dumps({"format": 1, "episodes": 5}).encode(),
    "no format": json.dumps({"episodes": {}}).encode(),
    "a list": json.dumps([{"id": "a"}]).encode(),
    "null": b"null",
    "garbage bytes": b"\x00\xff\xfe not json \x80",
    "truncated": json.dumps({"format": 1, "episodes": {"a": GOOD_ENTRY}}).encode()[:-9],
    "entry not a dict": json.dumps({"format": 1, "episodes": {"a": [6, 8]}}).encode(),
    "entry id differs": json.dumps({"format": 1, "episodes": {"a": {**GOOD_ENTRY,
                                                                    "id": "b"}}}).encode(),
    "frames not an int": json.dumps({"format": 1, "episodes": {"a": {**GOOD_ENTRY,
                                                                     "frames": "6"}}}).encode(),
    "pending not ids": json.dumps({"format": 1, "episodes": {}, "pending": [3]}).encode(),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_index_raises_and_changes_nothing(tmp_path, name):
    store = EpisodeStore(tmp_path)
    store.write(make_episode(t=6, seed=0), "a")
    (tmp_path / "index.json").write_bytes(MALFORMED[name])
    before = snapshot(tmp_path)
    for call in (lambda: store.index, store.ids, store.validate_all, store.describe,
                 lambda: store.write(make_episode(t=6, seed=1)),
                 lambda: store.write(make_episode(t=6, seed=1), "b"),
                 lambda: store.write(make_episode(t=6, seed=1), "a", overwrite=True)):
        with pytest.raises(EpisodeError, match=r"index\.json.*expected"):
            call()
    assert snapshot(tmp_path) == before
    assert store.rebuild_index() == {"a": {"id": "a", **make_episode(t=6, seed=0).summary()}}


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.floats(allow_nan=False)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8)
_entry = st.fixed_dictionaries({"id": st.sampled_from(["a", "b"]) | _json,
                                "frames": st.sampled_from([6, 0, True]) | _json,
                                "size": st.sampled_from([[8, 8], [8], [8, "8"]]) | _json,
                                "events": st.sampled_from([[], ["x"], [1]]) | _json})
_index = st.one_of(
    _json,
    st.fixed_dictionaries({"format": st.sampled_from([1, 2]),
                           "episodes": st.dictionaries(st.sampled_from(["a", "b", "../x"]),
                                                       _entry | _json, max_size=2)}))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(doc=_index)
def test_any_index_is_either_accepted_or_refused_cleanly(doc):
    """Whatever JSON index.json holds, a write either indexes its episode or raises
    EpisodeError with the directory untouched: no stray TypeError, no unindexed file."""
    with tempfile.TemporaryDirectory() as root:
        root = Path(root)
        (root / "index.json").write_text(json.dumps(doc))
        store = EpisodeStore(root)
        before = snapshot(root)
        try:
            episode_id = store.write(make_episode(t=6, seed=0), "new")
        except EpisodeError as e:
            assert "index.json" in str(e) and "expected" in str(e)
            assert snapshot(root) == before
        else:
            assert episode_id in store.index and store.read(episode_id).meta["seed"] == 0


# ----------------------------------------------------------------------------------------
# SIGKILL mid-write
# ----------------------------------------------------------------------------------------


def _write_forever(root: str, first_seed: int) -> None:
    store = EpisodeStore(root)
    for seed in itertools.count(first_seed):
        store.write(make_episode(t=6, seed=seed))


def test_sigkill_mid_write_leaves_a_consistent_store(tmp_path):
    rng = random.Random(0)
    store = EpisodeStore(tmp_path)
    committed: dict[str, dict] = {}
    for kill in range(8):
        writer = FORK.Process(target=_write_forever, args=(str(tmp_path), 1000 * kill))
        writer.start()
        # a random moment of the write loop once it has committed one more episode: on a
        # loaded machine a fixed delay can end before the writer has even started
        deadline = time.monotonic() + 60
        while len(store.index) <= len(committed) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(10)
        assert writer.exitcode == -signal.SIGKILL, "the writer died before it was killed"
        assert store.validate_all() == {}, f"after kill {kill}"
        index = store.index
        assert index.items() >= committed.items()  # nothing committed earlier was lost
        # killed writers leave hidden temp files behind: none may pass for an episode
        assert set(store.ids()) == set(index) and all(ID_RE.match(i) for i in index)
        for episode_id, entry in index.items():
            assert {"id": episode_id, **store.read(episode_id).summary()} == entry
        committed = index
    assert len(committed) >= 8  # every writer committed before it was killed
    store.write(make_episode(t=6, seed=1))
    assert _pending(tmp_path) == [] and not list(tmp_path.glob(".*"))  # no temp file left
    assert store.validate_all() == {} and set(store.ids()) == set(store.index)


def _pending(root: Path) -> list:
    return json.loads((root / "index.json").read_bytes()).get("pending", [])
