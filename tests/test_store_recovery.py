"""The episode store against everything a shared machine does to it: damaged files, a lost
index, a full disk, writers killed mid-write or mid-overwrite, and readers racing writers
(the module docstring of `episodes.store` says what each one guarantees)."""

import contextlib
import errno
import json
import multiprocessing
import os
import random
import signal
import subprocess
import threading
import time
import warnings
from pathlib import Path

import pytest

from test_episodes import make_episode
from test_store_reliability import snapshot
from worldlab.episodes import EpisodeError, EpisodeStore, load_track, save_episode

FORK = multiprocessing.get_context("fork")


def _summary(store: EpisodeStore, episode_id: str) -> dict:
    return {"id": episode_id, **store.read(episode_id).summary()}


# ----------------------------------------------------------------------------------------
# Damaged files: only the store's own error, naming the file
# ----------------------------------------------------------------------------------------


def _flipped(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice([1, 2, 4, 8])):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def test_byte_flips_in_an_episode_raise_only_the_store_error(tmp_path):
    """Flipped bits surface as zlib, zipfile, numpy or tokenizer errors deep down; each must
    reach the caller as EpisodeError naming the file, and validate_all and rebuild_index
    must report it and carry on with the others."""
    store = EpisodeStore(tmp_path)
    for seed in range(3):
        store.write(make_episode(t=6, seed=seed), f"e{seed}")
    good = (tmp_path / "e1.npz").read_bytes()
    rng = random.Random(0)
    for trial in range(400):
        (tmp_path / "e1.npz").write_bytes(_flipped(good, rng))
        for read in (lambda: store.read("e1"), lambda: load_track(tmp_path / "e1.npz")):
            try:
                read()
            except EpisodeError as e:
                assert "e1.npz" in str(e), f"trial {trial}: {e}"
    # the last damage that does not read: every whole-store call reports it, none stops
    while True:
        (tmp_path / "e1.npz").write_bytes(_flipped(good, rng))
        with contextlib.suppress(EpisodeError):
            store.read("e1")
            continue
        break
    problems = store.validate_all()
    assert list(problems) == ["e1"] and "e1.npz" in problems["e1"]
    with pytest.warns(UserWarning, match=r"left out 1 damaged: .*e1\.npz"):
        assert sorted(store.rebuild_index()) == ["e0", "e2"]
    assert store.ids() == ["e0", "e2"]


def test_byte_flips_in_the_index_raise_only_the_store_error(tmp_path):
    store = EpisodeStore(tmp_path)
    for seed in range(3):
        store.write(make_episode(t=6, seed=seed))
    good = (tmp_path / "index.json").read_bytes()
    rng = random.Random(1)
    for trial in range(300):
        (tmp_path / "index.json").write_bytes(_flipped(good, rng))
        try:
            problems = store.validate_all()  # a flip may leave valid JSON: then a report
        except EpisodeError as e:
            assert "index.json" in str(e), f"trial {trial}: {e}"
        else:
            assert all(isinstance(p, str) for p in problems.values())


# ----------------------------------------------------------------------------------------
# A lost index is rebuilt on open, saying so; never silently empty
# ----------------------------------------------------------------------------------------


def test_a_lost_index_is_rebuilt_on_open_and_before_a_write(tmp_path):
    store = EpisodeStore(tmp_path)
    for seed in range(3):
        store.write(make_episode(t=6, seed=seed))
    expected = store.index
    (tmp_path / "index.json").unlink()
    with pytest.warns(UserWarning, match=r"rebuilt index\.json \(it was missing\) from 3"):
        opened = EpisodeStore.open(tmp_path)
    assert opened.index == expected and opened.ids() == sorted(expected)
    (tmp_path / "index.json").unlink()  # and a store made without open: its first listing
    with pytest.warns(UserWarning, match="it was missing"):
        assert EpisodeStore(tmp_path).ids() == sorted(expected)
    (tmp_path / "index.json").unlink()  # and a write: the new index holds every episode
    with pytest.warns(UserWarning, match="it was missing"):
        new = EpisodeStore(tmp_path).write(make_episode(t=6, seed=9))
    assert sorted(EpisodeStore(tmp_path).index) == sorted([*expected, new])


@contextlib.contextmanager
def _tmpfs(path: Path, size: str):
    """A small tmpfs at `path` (root and mount(8) needed; skipped where they are not)."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_a_lost_index_on_a_read_only_store_is_refused_naming_it(tmp_path):
    with _tmpfs(tmp_path / "ro", "1m") as root:
        store = EpisodeStore(root)
        store.write(make_episode(t=6, seed=0))
        (root / "index.json").unlink()
        subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
        with pytest.warns(UserWarning, match="cannot recover"):
            with pytest.raises(EpisodeError, match=r"index\.json is missing.*1 episode"):
                store.ids()
        assert sorted(os.listdir(root)) == ["000000.npz"]
        subprocess.run(["mount", "-o", "remount,rw", str(root)], check=True)
        with pytest.warns(UserWarning, match="it was missing"):
            store.recover()  # writable again: the index is rebuilt
        before = snapshot(root)
        subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
        with pytest.raises(OSError, match="Read-only"):  # a write that may not write
            store.write(make_episode(t=6, seed=1))
        assert snapshot(root) == before and store.ids() == ["000000"]


# ----------------------------------------------------------------------------------------
# A write that fails leaves the store exactly as it was
# ----------------------------------------------------------------------------------------


def _fill(root: Path, leave_bytes: int) -> Path:
    """A file that leaves `leave_bytes` (rounded to pages) free on root's filesystem."""
    vfs = os.statvfs(root)
    free = vfs.f_bavail * vfs.f_frsize
    filler = root.parent / "filler"
    filler.write_bytes(b"\0" * (free - leave_bytes))
    return filler


def test_a_full_disk_leaves_the_store_as_it_was_and_a_retry_stores_once(tmp_path):
    """Room for the episode file but not for the index update after it: the write fails
    with ENOSPC, and nothing of it stays (no file, no pending id, no temp file)."""
    episode = make_episode(t=6, seed=7)
    EpisodeStore(tmp_path / "probe").write(episode, "probe")
    pages = -(-(tmp_path / "probe" / "probe.npz").stat().st_size // 4096)
    with _tmpfs(tmp_path / "disk", "1m") as disk:
        store = EpisodeStore(disk / "store")
        for seed in range(2):
            store.write(make_episode(t=6, seed=seed))
        before = snapshot(store.root)
        filler = _fill(store.root, pages * 4096)  # the episode fits; the index after it not
        with pytest.raises(OSError) as failed:
            store.write(episode)
        assert failed.value.errno == errno.ENOSPC
        assert snapshot(store.root) == before and not list(store.root.glob(".*"))
        for overwrite in ("000000", "000001"):  # an overwrite puts the old version back
            with pytest.raises(OSError):
                store.write(episode, overwrite, overwrite=True)
            assert snapshot(store.root) == before
        filler.unlink()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "a writer was killed" for a failed write
            assert store.write(episode) == "000002"
        assert store.ids() == ["000000", "000001", "000002"]
        assert store.validate_all() == {}


def test_an_interrupted_overwrite_puts_the_old_version_back(tmp_path, monkeypatch):
    """Ctrl-C after the new file is in place but before the index holds it."""
    from worldlab.episodes import store as store_module

    store = EpisodeStore(tmp_path)
    store.write(make_episode(t=6, seed=0), "a")
    before = snapshot(tmp_path)
    real_save = store_module.save_episode

    def save_then_interrupt(episode, path):
        real_save(episode, path)
        raise KeyboardInterrupt

    monkeypatch.setattr(store_module, "save_episode", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        store.write(make_episode(t=6, seed=1), "a", overwrite=True)
    assert snapshot(tmp_path) == before


# ----------------------------------------------------------------------------------------
# Killed writers: their temp files go, their overwrites stay listed and consistent
# ----------------------------------------------------------------------------------------


def _overwrite_forever(root: str, first_seed: int) -> None:
    store = EpisodeStore(root)
    for seed in range(first_seed, first_seed + 10_000):
        store.write(make_episode(t=6, seed=seed), "a", overwrite=True)
        store.write(make_episode(t=6, seed=seed), f"n{seed}")


def _kill_at_random(root: Path, rng: random.Random, first_seed: int) -> None:
    writer = FORK.Process(target=_overwrite_forever, args=(str(root), first_seed))
    writer.start()
    deadline = time.monotonic() + 60
    while not (root / f"n{first_seed}.npz").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(rng.uniform(0.0, 0.03))
    os.kill(writer.pid, signal.SIGKILL)
    writer.join(10)
    assert writer.exitcode == -signal.SIGKILL, "the writer died before it was killed"


def test_killed_overwrites_stay_listed_and_temp_files_are_removed(tmp_path):
    rng = random.Random(0)
    store = EpisodeStore(tmp_path)
    store.write(make_episode(t=6, seed=0), "a")
    for kill in range(12):
        _kill_at_random(tmp_path, rng, 1000 * (kill + 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a listing ends the killed write, saying so
            assert "a" in store.ids(), f"after kill {kill}"  # no write needed to list it
        assert store.index["a"] == _summary(store, "a")  # the entry is the file's version
        EpisodeStore.open(tmp_path)
        assert not list(tmp_path.glob(".*")), f"temp files left after kill {kill}"
        assert store.validate_all() == {}


def test_the_next_open_removes_the_temp_files_of_killed_writers(tmp_path):
    rng = random.Random(1)
    store = EpisodeStore(tmp_path)
    store.write(make_episode(t=6, seed=0), "a")
    for kill in range(40):  # until a kill lands mid-write (bounded)
        _kill_at_random(tmp_path, rng, 1000 * (kill + 1))
        if list(tmp_path.glob(".*.tmp")):
            break
    assert list(tmp_path.glob(".*.tmp")), "no kill landed mid-write in 40 tries"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        EpisodeStore.open(tmp_path)
    assert not list(tmp_path.glob(".*")) and store.validate_all() == {}


def test_open_waits_for_a_live_writer_and_spares_its_temp_file(tmp_path):
    store = EpisodeStore(tmp_path)
    store.write(make_episode(t=6, seed=0))
    holding, release = FORK.Event(), FORK.Event()

    def live_writer():
        import fcntl
        with store._locked(fcntl.LOCK_EX):
            (tmp_path / ".000001.npz.live1234.tmp").write_bytes(b"half")
            holding.set()
            release.wait(30)
            (tmp_path / ".000001.npz.live1234.tmp").unlink()

    writer = FORK.Process(target=live_writer)
    writer.start()
    assert holding.wait(30)
    opener = threading.Thread(target=EpisodeStore.open, args=(tmp_path,))
    opener.start()
    opener.join(0.5)
    assert opener.is_alive() and (tmp_path / ".000001.npz.live1234.tmp").exists()
    release.set()
    writer.join(30)
    opener.join(30)
    assert not opener.is_alive() and store.ids() == ["000000"]


# ----------------------------------------------------------------------------------------
# Readers racing writers
# ----------------------------------------------------------------------------------------


def _write_many(root: str, first: int, start) -> None:
    store = EpisodeStore(root)
    start.wait()
    for k in range(first, first + 60):
        store.write(make_episode(t=6, seed=k), f"r{k:04d}")


def test_listing_agrees_with_the_index_under_concurrent_writes(tmp_path):
    """What ids() lists, index.json holds (read after it) and the file reads whole. A
    store of some hundred episodes makes each listing long enough for writes to land in it."""
    for k in range(400):
        save_episode(make_episode(t=6, size=4, seed=k), tmp_path / f"old{k:04d}.npz")
    EpisodeStore(tmp_path).rebuild_index()
    start = FORK.Barrier(3)
    writers = [FORK.Process(target=_write_many, args=(str(tmp_path), 100 * w, start))
               for w in range(2)]
    for w in writers:
        w.start()
    start.wait()
    store, passes = EpisodeStore(tmp_path), 0
    while any(w.is_alive() for w in writers) or passes < 20:
        listed = store.ids()
        held = json.loads((tmp_path / "index.json").read_bytes())["episodes"]
        assert set(listed) <= set(held), f"listed before indexed: {set(listed) - set(held)}"
        store.read(listed[-1])
        passes += 1
    for w in writers:
        w.join(60)
        assert w.exitcode == 0
    assert len(store.ids()) == 520 and store.validate_all() == {}


# ----------------------------------------------------------------------------------------
# The other stores: a killed writer's temporaries go, a live writer's stay
# ----------------------------------------------------------------------------------------


def _stuck_writer(kind: str, target: str, started) -> None:
    """Start an atomic write of `target` that never finishes (until killed)."""
    from worldlab.atomic import atomic_dir, atomic_write

    def stall(_):
        started.set()
        time.sleep(120)

    if kind == "file":
        atomic_write(Path(target), stall)
    else:
        atomic_dir(Path(target), stall)


def _start_stuck(kind: str, target: Path):
    started = FORK.Event()
    writer = FORK.Process(target=_stuck_writer, args=(kind, str(target), started))
    writer.start()
    assert started.wait(30)
    return writer


def test_latent_caches_and_saved_folders_sweep_only_dead_writers_temps(tmp_path):
    from worldlab.atomic import atomic_dir
    from worldlab.episodes import LatentCache

    cache = tmp_path / "latents"
    cache.mkdir()
    dead = _start_stuck("file", cache / "a.safetensors")
    os.kill(dead.pid, signal.SIGKILL)
    dead.join(10)
    live = _start_stuck("file", cache / "b.safetensors")
    saves = tmp_path / "saves"
    dead_dir = _start_stuck("dir", saves / "world")
    os.kill(dead_dir.pid, signal.SIGKILL)
    dead_dir.join(10)
    try:
        assert len(list(cache.glob(".*.tmp"))) == 2 and len(list(saves.glob(".tmp-*"))) == 1
        LatentCache(cache)  # opening the cache sweeps the dead encoder's temp file only
        assert [p.name.split(".")[1] for p in cache.glob(".*.tmp")] == ["b"]
        atomic_dir(saves / "world", lambda d: (d / "f").write_text("x"))
        assert sorted(p.name for p in saves.iterdir()) == ["world"]  # the next write swept
    finally:
        live.kill()
        live.join(10)


def test_the_rebuild_index_command_names_the_damaged_files(tmp_path, capsys):
    from worldlab.cli import main

    store = EpisodeStore(tmp_path)
    for seed in range(2):
        store.write(make_episode(t=6, seed=seed))
    (tmp_path / "index.json").write_text("{not json")
    assert main(["data", "rebuild-index", "--store", str(tmp_path)]) == 0
    assert "indexed 2 episodes" in capsys.readouterr().out
    (tmp_path / "000001.npz").write_bytes(b"PK damaged")
    assert main(["data", "rebuild-index", "--store", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "000001.npz" in out and "indexed 1 episodes" in out and store.ids() == ["000000"]


def test_byte_flips_in_a_latent_file_raise_only_the_store_error(tmp_path):
    """A flip in the header fails to parse; one in the values may make them non-finite,
    which `put` never writes: both are EpisodeError naming the file."""
    import numpy as np

    from worldlab.episodes import LatentCache

    latents = np.random.default_rng(0).standard_normal((4, 4, 8, 8)).astype(np.float16)
    LatentCache(tmp_path).put("a", latents)
    good = (tmp_path / "a.safetensors").read_bytes()
    rng, refused = random.Random(2), 0
    for trial in range(300):
        (tmp_path / "a.safetensors").write_bytes(_flipped(good, rng))
        try:
            got = LatentCache(tmp_path).get("a")
        except EpisodeError as e:
            assert "a.safetensors" in str(e), f"trial {trial}: {e}"
            refused += 1
        else:
            assert np.isfinite(got).all() and got.shape == latents.shape
    assert refused > 0
    inf = latents.copy()
    inf[0, 0, 0, 0] = np.inf
    from safetensors.numpy import save_file
    save_file({"latents": inf}, str(tmp_path / "a.safetensors"))
    with pytest.raises(EpisodeError, match=r"a\.safetensors holds 1 non-finite values"):
        LatentCache(tmp_path).get("a")
