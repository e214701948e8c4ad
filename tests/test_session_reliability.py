"""A hostile user against `WorldSession`: saves that never destroy, loads that check
everything before changing anything, a failed or interrupted chunk that leaves nothing half
done, and widget keys that are not keys. A tiny randomised world (see test_play) with the
procedural engine at 32x32 as the twin."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from worldlab.camera import Action
from worldlab.play import NotebookGame, WorldSession, saved
from worldlab.pretrained import load_world

from test_play import WALK, assert_same_state


@pytest.fixture(scope="module")
def world(world_dir):
    torch.set_num_threads(1)
    return load_world(world_dir, device="cpu")


def started(world, steps: int = 5, twin: bool = True) -> WorldSession:
    s = WorldSession(world, twin=twin)
    s.reset(engine="procedural", seed=0)
    for i in range(steps):
        s.step(WALK[i % len(WALK)], "summon a monster" if i == 2 else None)
    return s


def tree_hash(root: Path) -> dict[str, str]:
    """Every file under root -> sha256 of its bytes (folders by their listing)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "dir" for p in sorted(Path(root).rglob("*"))}


# ----------------------------------------------------------------------------------------
# Saves never destroy
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["file", "folder", "cwd", "save_plus_file"])
def test_save_refuses_anything_but_a_session_folder(world, tmp_path, monkeypatch, target):
    s = started(world, steps=1, twin=False)
    victim = tmp_path / "victim"
    if target == "file":
        victim.write_text("my notes")
    elif target == "folder":  # e.g. save("runs"): a folder of the user's things
        (victim / "sub").mkdir(parents=True)
        (victim / "results.json").write_text("{}")
        (victim / "sub" / "model.safetensors").write_bytes(b"weights")
    elif target == "save_plus_file":  # a session save the user put something else into
        s.save(victim)
        (victim / "notes.txt").write_text("mine")
    else:  # save(".")
        victim.mkdir()
        (victim / "keep.txt").write_text("keep")
        monkeypatch.chdir(victim)
    before = tree_hash(tmp_path)
    with pytest.raises(saved.SaveError, match="cannot save a session to"):
        s.save("." if target == "cwd" else victim)
    assert tree_hash(tmp_path) == before  # nothing written, moved or left behind


def test_save_creates_or_replaces_a_previous_save_only(world, tmp_path):
    s = started(world, steps=3, twin=False)
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "new" / "session", tmp_path / "empty"):
        s.save(target)
        assert saved.is_session_save(target)
    s.step(Action(forward=0.1))
    s.save(tmp_path / "empty")  # replaces the previous save
    meta = json.loads((tmp_path / "empty" / saved.META_FILE).read_text())
    assert (meta["format"], meta["version"], meta["step"]) == (saved.FORMAT, saved.VERSION, 4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "new"]  # no temp left


def test_an_unmarked_save_of_an_earlier_worldlab_is_replaced_not_loaded(world, tmp_path):
    s = started(world, steps=2, twin=False)
    s.save(tmp_path / "old")
    meta = json.loads((tmp_path / "old" / saved.META_FILE).read_text())
    del meta["format"], meta["version"]  # as saves were written before the marker
    (tmp_path / "old" / saved.META_FILE).write_text(json.dumps(meta))
    with pytest.raises(saved.SaveError, match="earlier worldlab"):
        s.load(tmp_path / "old")
    s.save(tmp_path / "old")
    s.load(tmp_path / "old")


# ----------------------------------------------------------------------------------------
# Loads check everything first
# ----------------------------------------------------------------------------------------

CORRUPT_META = {
    "policy": "fast", "steps": 0, "step": -1, "queue": 99, "event": 5, "pending": "",
    "engine": "quake", "twin": "yes", "on_screen": "sideways", "size": 31, "seed": 1.5,
    "log_prompts": {"999999": "summon a monster"}, "version": 4, "format": "other",
    "model": {"width": 999}, "memory_config": {"sink": True},
    "memory": {"chunks": 1, "frames": 4, "last_tokens": 0, "last_memory": [3]},
}


def _tensor_corruptions(f: int) -> dict:
    nan_pose = torch.eye(4, dtype=torch.float64)
    nan_pose[0, 3] = float("nan")
    return {
        "rng": torch.zeros(7, dtype=torch.uint8),
        "pose": nan_pose,
        "gen_pose": 2 * torch.eye(4, dtype=torch.float64),  # not a rotation
        "last_frame": torch.zeros(32, 32, 3),  # float, not uint8
        "last_twin": torch.zeros(16, 16, 3, dtype=torch.uint8),
        "buffered": torch.zeros(1, 3, dtype=torch.float64),
        "log": torch.zeros(5, dtype=torch.uint8),
        "cache.k.0": torch.zeros(1, 2, 3, 4),
        "cache.k.99": torch.zeros(1, 2, 3, 4),
        "queue.0.frame": None,  # deleted
        "cache.v.1": None,
        # the context chunk that waits for its K/V (a fresh session's first chunk)
        "cache.pending.x": torch.zeros(1, f, 3),
        "cache.pending.text": None,
        "cache.pending.noise": torch.zeros(1),
    }


def _write_raw(path: Path, tensors: dict, meta: dict) -> None:
    path.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path / saved.STATE_FILE))
    (path / saved.META_FILE).write_text(json.dumps(meta))


def _assert_load_refused(s: WorldSession, path: Path, match: str) -> None:
    before, engine = s.snapshot(), s.engine
    with pytest.raises(saved.SaveError, match=match):
        s.load(path)
    assert_same_state(before, s.snapshot())
    assert s.engine is engine  # the twin was not closed
    s.engine.step(Action())  # ... and still plays


@pytest.mark.parametrize("key", sorted(CORRUPT_META))
def test_load_refuses_a_bad_metadata_field(world, tmp_path, key):
    good = started(world)
    good.save(tmp_path / "good")
    tensors, meta = saved.read(tmp_path / "good")
    meta[key] = CORRUPT_META[key]
    _write_raw(tmp_path / "bad", tensors, meta)
    _assert_load_refused(started(world, steps=2), tmp_path / "bad",
                         rf"session\.json.*{key!r}|session\.json.*{key}|{key}")


@pytest.mark.parametrize("key", sorted(_tensor_corruptions(4)))
def test_load_refuses_a_bad_tensor(world, tmp_path, key):
    good = started(world)
    good.save(tmp_path / "good")
    tensors, meta = saved.read(tmp_path / "good")
    value = _tensor_corruptions(world.chunk_frames)[key]
    if value is None:
        del tensors[key]
    else:
        tensors[key] = value
    _write_raw(tmp_path / "bad", tensors, meta)
    _assert_load_refused(started(world, steps=2), tmp_path / "bad",
                         rf"{saved.STATE_FILE}.*{key}|{key}")


def test_a_version_1_save_still_loads_and_plays(world, tmp_path):
    s = started(world, steps=2, twin=False)
    world.model.flush(s.state.stream.cache)  # version 1 saved the K/V of a waiting chunk, not it
    s.save(tmp_path / "v2")
    tensors, meta = saved.read(tmp_path / "v2")
    assert not any(k.startswith("cache.pending.") for k in tensors)
    _write_raw(tmp_path / "v1", tensors, {**meta, "version": 1})
    resumed = started(world, twin=False)
    resumed.load(tmp_path / "v1")
    assert_same_state(s.snapshot(), resumed.snapshot())
    for _ in range(world.chunk_frames + 1):  # into the next chunk, alike
        a, b = s.step(Action(forward=0.2)), resumed.step(Action(forward=0.2))
        assert np.array_equal(a.frame, b.frame)
    good = started(world, twin=False)  # a waiting chunk in a version-1 save: refused
    good.save(tmp_path / "pending")
    tensors, meta = saved.read(tmp_path / "pending")
    _write_raw(tmp_path / "bad", tensors, {**meta, "version": 1})
    with pytest.raises(saved.SaveError, match="version-1 save holds 'cache.pending"):
        started(world, twin=False).load(tmp_path / "bad")


@pytest.mark.parametrize("content", [b"", b"\x00\xff garbage", b"{\"format\": 1"])
def test_load_names_a_damaged_file(world, tmp_path, content):
    started(world).save(tmp_path / "good")
    for name in (saved.META_FILE, saved.STATE_FILE):
        bad = tmp_path / f"bad-{name}"
        bad.mkdir()
        for other in (saved.META_FILE, saved.STATE_FILE):
            (bad / other).write_bytes(content if other == name else
                                      (tmp_path / "good" / other).read_bytes())
        _assert_load_refused(started(world, steps=1), bad, name.replace(".", r"\."))


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-5, 10 ** 6) |
                           st.floats(allow_nan=True) | st.text(max_size=8),
                           lambda kids: st.lists(kids, max_size=3) |
                           st.dictionaries(st.text(max_size=4), kids, max_size=3), max_leaves=5)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(key=st.sampled_from(sorted(CORRUPT_META) + ["chunks", "scene"]), value=JSON_VALUES)
def test_any_metadata_value_loads_cleanly_or_is_refused_with_nothing_changed(
        world, tmp_path_factory, key, value):
    tmp = tmp_path_factory.mktemp("fuzz")
    good = started(world, steps=3, twin=False)
    good.save(tmp / "good")
    tensors, meta = saved.read(tmp / "good")
    meta[key] = value
    _write_raw(tmp / "bad", tensors, meta)
    s = started(world, steps=1, twin=False)
    before = s.snapshot()
    try:
        s.load(tmp / "bad")
    except saved.SaveError:
        assert_same_state(before, s.snapshot())
        return
    s.step(Action(forward=0.1))  # what loaded must also play


# ----------------------------------------------------------------------------------------
# A failed chunk leaves nothing half done
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["sampling", "decoding"])
def test_an_interrupted_chunk_changes_nothing_and_play_goes_on_in_step(world, monkeypatch,
                                                                      where):
    f = world.chunk_frames
    ref, s = started(world, steps=f), started(world, steps=f)  # the next step opens a chunk
    before = s.snapshot()
    import worldlab.memory.stream as module  # the stream makes every chunk

    calls = {"n": 0}

    def interrupt(*args, **kwargs):
        calls["n"] += 1
        raise KeyboardInterrupt  # Ctrl-C in the notebook, after the twin has stepped

    if where == "sampling":
        monkeypatch.setattr(module, "sample_chunk", interrupt)
    else:
        monkeypatch.setattr(world, "decode", interrupt)
    with pytest.raises(KeyboardInterrupt):
        s.step(Action(forward=0.25))
    monkeypatch.undo()
    assert calls["n"] == 1
    assert_same_state(before, s.snapshot())
    for i in range(2 * f):  # model and twin still march together, as if nothing happened
        a, b = ref.step(WALK[i % 4]), s.step(WALK[i % 4])
        assert np.array_equal(a.frame, b.frame) and np.array_equal(a.twin_frame, b.twin_frame)
        assert np.array_equal(a.c2w, b.c2w)


@pytest.mark.parametrize("key", [None, 5, b"w", ["w"]])
def test_widget_rejects_keys_that_are_not_key_names(world, key):
    s = started(world, steps=1)
    game = NotebookGame(s)
    before = s.snapshot()
    with pytest.raises(ValueError, match="key must be a str"):
        game.press(key)
    assert_same_state(before, s.snapshot())


# ----------------------------------------------------------------------------------------
# Kill -9 during a save
# ----------------------------------------------------------------------------------------

def _save_forever(world, target: Path, ready) -> None:
    """A forked child: step and save, again and again, until it is killed. It is ready once
    its first save is whole, so a kill always has a previous save to leave in place (on a
    loaded machine the first save can take longer than the shortest wait before the kill)."""
    s = WorldSession(world, twin=False)
    s.reset(engine="procedural", seed=0)
    while True:
        s.step(Action(forward=0.1))
        s.save(target)
        ready.set()


def test_kill_9_during_saves_leaves_the_previous_save_loadable(world, tmp_path):
    """Forked (a fresh interpreter would spend seconds importing torch), killed at random
    moments; each time the save in place is a whole one."""
    import multiprocessing as mp

    ctx, target = mp.get_context("fork"), tmp_path / "session"
    rng = np.random.default_rng(0)
    for _ in range(4):
        ready = ctx.Event()
        proc = ctx.Process(target=_save_forever, args=(world, target, ready), daemon=True)
        proc.start()
        assert ready.wait(30)
        time.sleep(float(rng.uniform(0.05, 0.5)))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        s = WorldSession(world, twin=False)
        s.load(target)  # the last complete save, whole
        s.step(Action(forward=0.1))
        leftovers = [p.name for p in tmp_path.iterdir() if p.name != "session"]
        for name in leftovers:  # a killed writer may leave its hidden temp folder ...
            assert name.startswith("."), name
        assert saved.is_session_save(target)  # ... but never in the save's place
