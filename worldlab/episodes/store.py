"""The episode store: a directory of `<id>.npz` episodes (see `schema`) and `index.json`,
safe with several writer processes, with readers racing them, and with a writer that fails
or is killed at any moment.

Every file appears whole (temp file + rename, `worldlab.atomic`), so a reader never sees a
half-written episode or index. On top of that:

Writers take turns, and listings wait for them. A write holds an exclusive `fcntl.flock` on
the store directory itself from id allocation to its last index update, so automatic ids
stay unique and no writer's read-modify-write of index.json overwrites another's; a listing
(`ids`, `index`, `describe`, `validate_all`) holds a shared one while it reads index.json and
the file names, so what it lists is what the index holds, never a write half done. The lock
is on the directory, not on a `.lock` file, so the directory holds only episodes and the
index; and the kernel drops a flock when its holder dies, so a killed writer leaves no stale
lock. (flock is advisory and per machine: it does not protect a store that processes on
several machines write over NFS.) `read` needs no lock: a file is whole or absent.

A write is journaled and undone on failure. An episode and its index entry are two files,
and no single rename commits both, so a write first lists its id under "pending" in
index.json, then writes the episode, then moves the id from "pending" to "episodes". A
write that fails in a way the process survives (an exception, a full disk, Ctrl-C) undoes
itself: a new episode's file is removed, an overwritten one's previous version (kept as a
hard link while the write runs) is put back, and the pending id is dropped, so a retry
stores the episode once. A writer killed outright (SIGKILL, power loss) cannot undo: its
pending id is ended by the next `recover`, which indexes the episode file if it reads whole
(the recording is kept) and otherwise drops the id, with a warning either way.

`recover` (exclusive lock) ends such writes, removes the temp files killed writers left (no
live writer can own one while the lock is held), and rebuilds a missing index.json from the
episode files, saying so. `open`, every write and a listing that meets a dead writer's
pending id or a lost index run it. On a store it cannot write (read-only), a listing leaves
pending ids out and a missing index raises EpisodeError naming it.

index.json is checked whenever it is read, and before anything is written, so a malformed
one raises EpisodeError naming it and leaves the directory as it was; `rebuild_index`
(which reads only the episodes) writes a new one, naming the damaged files it left out.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import warnings
from contextlib import contextmanager
from pathlib import Path

from ..atomic import atomic_write
from .schema import (FORMAT_VERSION, ID_RE, Episode, EpisodeError, Track, check_id,
                     load_episode, load_track, save_episode)

INDEX_LAYOUT = (f'{{"format": {FORMAT_VERSION}, "episodes": {{id: entry}}, '
                f'"pending": [id] (optional)}}')
ENTRY_LAYOUT = ('{"id": <its key>, "frames": int >= 1, "size": [h, w] ints >= 1, '
                '"events": [str], ...}')


# ----------------------------------------------------------------------------------------
# index.json, checked
# ----------------------------------------------------------------------------------------


def _show(value) -> str:
    """A JSON value as JSON, cut short: error messages quote what they found."""
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_count(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def _entry_ok(key: str, entry) -> bool:
    """Whether `entry` has the fields that readers of the index look up (`describe`,
    `EpisodeClips`, `format_index`); the others are optional (older stores lack some)."""
    if not isinstance(entry, dict):
        return False
    size, events = entry.get("size"), entry.get("events")
    return (entry.get("id") == key and _is_count(entry.get("frames"))
            and isinstance(size, list) and len(size) == 2 and all(map(_is_count, size))
            and isinstance(events, list) and all(isinstance(e, str) for e in events))


def _check_index(doc, path: Path) -> tuple[dict[str, dict], list[str]]:
    """(episodes, pending ids) of a parsed index.json; EpisodeError naming `path`, what it
    holds and what was expected if it is not a store index."""
    def bad(found: str, expected: str = INDEX_LAYOUT) -> EpisodeError:
        return EpisodeError(f"store index {path}: {found}; expected {expected} "
                            f"(python -m worldlab data rebuild-index writes a new one from "
                            f"the episodes)")

    if not isinstance(doc, dict):
        raise bad(f"found {_show(doc)}")
    if doc.get("format") != FORMAT_VERSION:
        raise bad(f"format is {_show(doc.get('format'))}")
    episodes, pending = doc.get("episodes"), doc.get("pending", [])
    if not isinstance(episodes, dict):
        raise bad(f'"episodes" is {_show(episodes)}')
    if not (isinstance(pending, list)
            and all(isinstance(i, str) and ID_RE.match(i) for i in pending)):
        raise bad(f'"pending" is {_show(pending)}', "a list of episode ids")
    for key, entry in episodes.items():
        if not (ID_RE.match(key) and _entry_ok(key, entry)):
            raise bad(f"entry {key!r} is {_show(entry)}",
                      f"ids matching {ID_RE.pattern} with entries {ENTRY_LAYOUT}")
    return episodes, pending


# ----------------------------------------------------------------------------------------
# The store: a directory of episodes plus index.json
# ----------------------------------------------------------------------------------------


# the temp files of `atomic_write` (.<name>.<random>.tmp) for the files a store writes, and
# the previous version an overwrite keeps aside under the same pattern
_TEMP_RE = re.compile(r"^\.(index\.json|[A-Za-z0-9][A-Za-z0-9_.-]*\.npz)"
                      r"\.[A-Za-z0-9_-]+\.tmp$")


class EpisodeStore:
    """A directory of `<id>.npz` episodes and an `index.json` summary of them."""

    INDEX = "index.json"

    def __init__(self, root: str | Path):
        """The store at root; a new one's folder is made by its first write."""
        self.root = Path(root)

    @classmethod
    def open(cls, store: "EpisodeStore | str | Path") -> "EpisodeStore":
        """`store` itself if it is one, else the store that exists at that path (a missing
        folder raises FileNotFoundError naming it, and makes nothing), recovered from what
        killed writers left (`recover`) where it can be written."""
        if isinstance(store, cls):
            return store
        if not Path(store).is_dir():
            raise FileNotFoundError(f"no episode store at {store}: expected a folder of "
                                    f"<id>.npz episodes and {cls.INDEX} (python -m worldlab "
                                    f"data record writes one)")
        store = cls(store)
        try:
            store._try_recover()
        except EpisodeError:  # a malformed index: every listing names it, and
            pass  # rebuild_index (which needs an open store) replaces it
        return store

    def path(self, episode_id: str) -> Path:
        check_id(episode_id)
        return self.root / f"{episode_id}.npz"

    def _files(self) -> list[str]:
        """Ids of every `<id>.npz`, including writes in flight (temp files start with .)."""
        return sorted(p.stem for p in self.root.glob("*.npz") if not p.name.startswith("."))

    @contextmanager
    def _locked(self, operation: int):
        """Hold flock(`operation`) on the store directory (see the module docstring); a
        writer's (LOCK_EX) makes the folder first."""
        if operation == fcntl.LOCK_EX:
            self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY)
        try:
            fcntl.flock(fd, operation)
            yield
        finally:
            # unlock explicitly: a child forked meanwhile (a pool replacing a worker) shares
            # the descriptor, and closing ours alone would leave the store locked
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _read_index(self) -> tuple[dict[str, dict], list[str]] | None:
        """(episodes, pending ids) of index.json, checked; None where there is none."""
        path = self.root / self.INDEX
        try:
            doc = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:  # ValueError: bad JSON or bad UTF-8
            raise EpisodeError(f"store index {path} cannot be read as JSON ({e}); expected "
                               f"{INDEX_LAYOUT} (python -m worldlab data rebuild-index "
                               f"writes a new one from the episodes)") from e
        return _check_index(doc, path)

    def _write_index(self, episodes: dict[str, dict], pending: tuple[str, ...] = ()) -> None:
        doc = {"format": FORMAT_VERSION, "episodes": dict(sorted(episodes.items()))}
        if pending:  # absent when no write is in flight: a settled index is as it always was
            doc["pending"] = list(pending)
        text = json.dumps(doc, indent=1)
        atomic_write(self.root / self.INDEX, lambda f: f.write(text.encode()))

    # ------------------------------------------------------------------------------------
    # Listing: one moment with no write in flight
    # ------------------------------------------------------------------------------------

    def _view(self) -> tuple[dict[str, dict], list[str]]:
        """(index entries, ids of the indexed episodes whose files are here), read under
        the shared lock; a dead writer's pending id or a lost index is recovered first."""
        if not self.root.is_dir():
            return {}, []
        for attempt in range(2):
            with self._locked(fcntl.LOCK_SH):
                doc, files = self._read_index(), self._files()
            if attempt or not (doc[1] if doc is not None else files):
                break
            self._try_recover()  # under LOCK_SH no writer was live: these are dead ones'
        if doc is None:
            if files:
                raise EpisodeError(f"store index {self.root / self.INDEX} is missing while "
                                   f"{len(files)} episode files are here, and the store "
                                   f"cannot be written to rebuild it; expected {INDEX_LAYOUT}")
            return {}, []
        episodes, pending = doc
        return episodes, sorted(set(episodes).intersection(files).difference(pending))

    def ids(self) -> list[str]:
        """Ids of the stored episodes: indexed, their files here, no write of them pending."""
        return self._view()[1]

    def __len__(self) -> int:
        return len(self.ids())

    @property
    def index(self) -> dict[str, dict]:
        """id -> summary (frames, size, engine, map, policy, seed, events, has_depth) of
        every episode whose write finished."""
        return self._view()[0]

    def describe(self, ids: list[str] | None = None) -> dict:
        """What episodes `ids` (default: all) are, in `config.DataConfig` fields, from the
        index: engine and map ("+"-joined if several), size, episode count, frames (the
        longest), policy ("mix" if several), and event_rate, start, monsters and walls (each
        None where the episodes differ or the index predates the field)."""
        index, listed = self._view()
        ids = listed if ids is None else list(ids)
        missing = [i for i in ids if i not in index]
        if not ids or missing:
            why = "none given" if not ids else f"{missing[0]!r} is not indexed"
            raise ValueError(f"cannot describe episodes of {self.root}: {why}")
        entries = [index[i] for i in ids]
        sizes = {tuple(e["size"]) for e in entries}
        if len(sizes) != 1 or len(next(iter(sizes))) != 2 or len(set(next(iter(sizes)))) != 1:
            raise ValueError(f"episodes of {self.root} must share one square frame size, got "
                             f"{sorted(sizes)}")
        joined = lambda k: "+".join(sorted({str(e.get(k)) for e in entries}))  # noqa: E731
        policies = {str(e.get("policy")).removesuffix("+events") for e in entries}
        return {"engine": joined("engine"), "map": joined("map"), "size": sizes.pop()[0],
                "episodes": len(ids), "frames": max(e["frames"] for e in entries),
                "policy": policies.pop() if len(policies) == 1 else "mix",
                "event_rate": _shared(entries, "event_rate"),
                "start": _shared(entries, "start"), "monsters": _shared(entries, "monsters"),
                "walls": _shared(entries, "walls")}

    # ------------------------------------------------------------------------------------
    # Writing, journaled and undone on failure
    # ------------------------------------------------------------------------------------

    def next_id(self) -> str:
        """The id an automatic `write` takes now (another writer may take it first: only
        `write`, under the lock, allocates it)."""
        numbers = [int(i) for i in self._files() if i.isdigit()]
        return f"{max(numbers, default=-1) + 1:06d}"

    def write(self, episode: Episode, episode_id: str | None = None,
              overwrite: bool = False) -> str:
        """Store an episode and index it; return its id (the next number if None). The
        episode and index.json are checked before anything is written; a write that fails
        leaves the store as it was (see the module docstring)."""
        episode.validate()
        with self._locked(fcntl.LOCK_EX):
            episodes = self._recover_locked()
            episode_id = self.next_id() if episode_id is None else episode_id
            path = self.path(episode_id)
            existed = path.exists()
            if existed and not overwrite:
                raise ValueError(f"episode {episode_id!r} already exists in {self.root}; "
                                 f"pass overwrite=True or another id")
            self._write_index(episodes, pending=(episode_id,))
            previous = None
            try:
                previous = _keep_aside(path) if existed else None
                save_episode(episode, path)
                self._write_index({**episodes, episode_id: {"id": episode_id,
                                                            **episode.summary()}})
            except BaseException:
                self._undo(path, existed, previous, episodes)
                raise
            finally:
                if previous is not None:
                    previous.unlink(missing_ok=True)
        return episode_id

    def _undo(self, path: Path, existed: bool, previous: Path | None,
              episodes: dict[str, dict]) -> None:
        """Put the store back as it was before a failed write of `path` (lock held)."""
        try:
            if previous is not None:
                os.replace(previous, path)
            elif not existed:
                path.unlink(missing_ok=True)
            self._write_index(episodes)
        except OSError as e:  # left pending: the next recover ends it
            warnings.warn(f"{self.root}: could not undo the failed write of {path.name} "
                          f"({e}); the next open or write of the store will", stacklevel=3)

    # ------------------------------------------------------------------------------------
    # Recovery: what killed writers left, and a lost index
    # ------------------------------------------------------------------------------------

    def _dead_temps(self) -> list[Path]:
        return [p for p in self.root.glob(".*.tmp") if _TEMP_RE.match(p.name)]

    def recover(self) -> None:
        """End the writes killed writers left pending, remove their temp files, and rebuild
        a missing index.json from the episode files (each with a warning); a store with
        nothing to recover is not locked or written."""
        if not self.root.is_dir():
            return
        doc = self._read_index()
        if self._dead_temps() or (doc[1] if doc is not None else self._files()):
            with self._locked(fcntl.LOCK_EX):
                self._recover_locked()

    def _try_recover(self) -> None:
        """`recover`, or a warning where the store cannot be written (read-only)."""
        try:
            self.recover()
        except OSError as e:
            warnings.warn(f"{self.root}: cannot recover the store ({e}); listings leave "
                          f"out writes that did not finish", stacklevel=3)

    def _recover_locked(self) -> dict[str, dict]:
        """`recover` with the exclusive lock held (so no live writer exists); returns the
        episodes of the index."""
        for temp in self._dead_temps():
            temp.unlink(missing_ok=True)
        doc = self._read_index()
        if doc is None:
            return self._rebuild(announce="it was missing") if self._files() else {}
        return self._end_pending(*doc)

    def _end_pending(self, episodes: dict[str, dict], pending: list[str]) -> dict[str, dict]:
        """End the writes a killed writer left pending: index an episode file that reads,
        drop the id of one that does not (a damaged file stays, for `validate_all` to
        report). Returns the episodes."""
        if not pending:
            return episodes
        episodes = dict(episodes)
        for i in pending:
            try:
                episodes[i] = {"id": i, **load_episode(self.path(i)).summary()}
                outcome = "indexed the episode file found at its path"
            except EpisodeError as e:
                episodes.pop(i, None)
                outcome = f"dropped the id: {e}"
            warnings.warn(f"{self.root}: the write of episode {i!r} did not finish (its "
                          f"writer was killed); {outcome}", stacklevel=4)
        self._write_index(episodes)
        return episodes

    def rebuild_index(self) -> dict[str, dict]:
        """Re-read every episode file and rewrite index.json from those that read whole,
        with a warning naming each one left out. The explicit repair: it ignores the old
        index, so it also replaces a malformed one."""
        with self._locked(fcntl.LOCK_EX):
            for temp in self._dead_temps():
                temp.unlink(missing_ok=True)
            return self._rebuild()

    def _rebuild(self, announce: str = "") -> dict[str, dict]:
        index, left_out = {}, []
        for i in self._files():
            try:
                index[i] = {"id": i, **load_episode(self.path(i)).summary()}
            except EpisodeError as e:
                left_out.append(str(e))
        self._write_index(index)
        if announce or left_out:
            why = f" ({announce})" if announce else ""
            bad = f"; left out {len(left_out)} damaged: " + "; ".join(left_out) if left_out \
                else ""
            warnings.warn(f"{self.root}: rebuilt {self.INDEX}{why} from {len(index)} "
                          f"episode files{bad}", stacklevel=3)
        return index

    # ------------------------------------------------------------------------------------
    # Reading and checking
    # ------------------------------------------------------------------------------------

    def _stored(self, episode_id: str) -> Path:
        path = self.path(episode_id)
        if not path.exists():
            raise ValueError(f"no episode {episode_id!r} in {self.root}; it has "
                             f"{len(self._files())} episodes")
        return path

    def read(self, episode_id: str) -> Episode:
        return load_episode(self._stored(episode_id))

    def read_track(self, episode_id: str) -> Track:
        """Poses, actions and prompts of an episode, without reading its pixels."""
        return load_track(self._stored(episode_id))

    def validate_all(self) -> dict[str, str]:
        """id -> problem for every episode file that fails to load or validate, is missing
        from the index or stale in it, and every index entry whose file is gone ({} = all
        good); it never stops at the first. Writes in flight are not episodes yet."""
        if not self.root.is_dir():
            return {}
        self._view()  # recovers what a killed writer left, or raises on a lost index
        problems = {}
        with self._locked(fcntl.LOCK_SH):
            index, pending = self._read_index() or ({}, [])
            files = set(self._files()).difference(pending)
            for i in sorted(files):
                try:
                    summary = {"id": i, **self.read(i).summary()}
                except EpisodeError as e:
                    problems[i] = str(e)
                    continue
                if i not in index:
                    problems[i] = f"not in {self.INDEX} (run data rebuild-index)"
                elif index[i] != summary:
                    problems[i] = f"its {self.INDEX} entry is stale (run data rebuild-index)"
            for i in sorted(set(index) - files - set(pending)):
                problems[i] = f"in {self.INDEX} but the file is missing"
        return problems


def _keep_aside(path: Path) -> Path:
    """A second name for the file at `path` (a hard link, or a copy where links are not
    supported), so an overwrite that fails can put it back; the name is a temp file's."""
    aside = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        os.link(path, aside)
    except OSError:
        shutil.copy2(path, aside)
    return aside


def _shared(entries: list[dict], key: str):
    """The value every index entry has for `key`, or None if they differ or lack it."""
    values = {entry.get(key) for entry in entries}
    return values.pop() if len(values) == 1 else None


def subset(store: EpisodeStore, out: str | Path, per_map: dict[str, int]) -> EpisodeStore:
    """A new store at `out` with the first `per_map[m]` episodes (in id order) of each map m
    of `store`, under their own ids (so a latent cache keyed by id serves both stores).
    Everything is checked before a file is written."""
    if not per_map or not all(isinstance(n, int) and n > 0 for n in per_map.values()):
        raise ValueError(f"per_map must map map names to counts >= 1, got {per_map!r}")
    index = store.index  # one read of index.json
    by_map: dict[str, list[str]] = {}
    for i, entry in sorted(index.items()):
        by_map.setdefault(entry.get("map") or "", []).append(i)
    for name, n in per_map.items():
        if len(by_map.get(name, [])) < n:
            raise ValueError(f"{store.root} has {len(by_map.get(name, []))} episodes on map "
                             f"{name!r}, {n} were asked for; its maps: {sorted(by_map)}")
    target = EpisodeStore(out)
    taken = set(target.ids())
    if taken - set(index):
        raise ValueError(f"{out} holds episodes that are not in {store.root}")
    for name, n in per_map.items():
        for i in by_map[name][:n]:
            if i not in taken:  # an interrupted subset continues
                target.write(store.read(i), i)
    return target
