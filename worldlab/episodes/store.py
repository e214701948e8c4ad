"""The episode store: a directory of `<id>.npz` episodes (see `schema`) and `index.json`,
safe with several writer processes and with a writer killed at any moment.

Every file appears whole (temp file + rename, `worldlab.atomic`), so a reader never sees a
half-written episode or index. On top of that:

Writers take turns. A write holds an exclusive `fcntl.flock` on the store directory itself
from id allocation to its last index update, so automatic ids stay unique and no writer's
read-modify-write of index.json overwrites another's. The lock is on the directory, not on
a `.lock` file or one entry file per episode, so the directory holds only episodes and the
index, as before; and the kernel drops a flock when its holder dies, so a killed writer
leaves no stale lock. (flock is advisory and per machine: it does not protect a store that
processes on several machines write over NFS.) `validate_all` and `rebuild_index` take the
lock too, to see no write half done; `index`, `ids` and `read` need none.

A write is journaled. An episode and its index entry are two files, and no single rename
commits both, so a write first lists its id under "pending" in index.json, then writes the
episode, then moves the id from "pending" to "episodes". A pending id is a write in
flight: `ids` and `validate_all` leave it out, so a store whose writer was killed at any
point is consistent. The next write (which holds the lock, so that writer is dead) ends
such a write: it indexes the episode file if one was written and reads, and otherwise
drops the id, with a warning either way.

index.json is checked whenever it is read, and before anything is written, so a malformed
one raises EpisodeError naming it and leaves the directory as it was; `rebuild_index`
(which reads only the episodes) writes a new one.
"""

from __future__ import annotations

import fcntl
import json
import os
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
                            f"(rebuild_index writes a new one from the episodes)")

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


class EpisodeStore:
    """A directory of `<id>.npz` episodes and an `index.json` summary of them."""

    INDEX = "index.json"

    def __init__(self, root: str | Path):
        """The store at root; a new one's folder is made by its first write."""
        self.root = Path(root)

    @classmethod
    def open(cls, store: "EpisodeStore | str | Path") -> "EpisodeStore":
        """`store` itself if it is one, else the store that exists at that path (for
        reading: a missing folder raises FileNotFoundError naming it, and makes nothing)."""
        if isinstance(store, cls):
            return store
        if not Path(store).is_dir():
            raise FileNotFoundError(f"no episode store at {store}: expected a folder of "
                                    f"<id>.npz episodes and {cls.INDEX} (python -m worldlab "
                                    f"data record writes one)")
        return cls(store)

    def path(self, episode_id: str) -> Path:
        check_id(episode_id)
        return self.root / f"{episode_id}.npz"

    def _files(self) -> list[str]:
        """Ids of every `<id>.npz`, including writes in flight (temp files start with .)."""
        return sorted(p.stem for p in self.root.glob("*.npz") if not p.name.startswith("."))

    def _settled(self, pending: list[str]) -> list[str]:
        """Ids of the episode files, less the `pending` writes in flight."""
        in_flight = set(pending)
        return [i for i in self._files() if i not in in_flight]

    def ids(self) -> list[str]:
        """Ids of the stored episodes: every `<id>.npz` but those of writes in flight."""
        return self._settled(self._read_index()[1])

    def __len__(self) -> int:
        return len(self.ids())

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

    def _read_index(self) -> tuple[dict[str, dict], list[str]]:
        """(episodes, pending ids) of index.json, checked; ({}, []) for a new store."""
        path = self.root / self.INDEX
        if not path.exists():
            return {}, []
        try:
            doc = json.loads(path.read_bytes())
        except (OSError, ValueError) as e:  # ValueError: bad JSON or bad UTF-8
            raise EpisodeError(f"store index {path} cannot be read as JSON ({e}); expected "
                               f"{INDEX_LAYOUT} (rebuild_index writes a new one from the "
                               f"episodes)") from e
        return _check_index(doc, path)

    @property
    def index(self) -> dict[str, dict]:
        """id -> summary (frames, size, engine, map, policy, seed, events, has_depth) of
        every episode whose write finished."""
        return self._read_index()[0]

    def _write_index(self, episodes: dict[str, dict], pending: tuple[str, ...] = ()) -> None:
        doc = {"format": FORMAT_VERSION, "episodes": dict(sorted(episodes.items()))}
        if pending:  # absent when no write is in flight: a settled index is as it always was
            doc["pending"] = list(pending)
        text = json.dumps(doc, indent=1)
        atomic_write(self.root / self.INDEX, lambda f: f.write(text.encode()))

    def describe(self, ids: list[str] | None = None) -> dict:
        """What episodes `ids` (default: all) are, in `config.DataConfig` fields, from the
        index: engine and map ("+"-joined if several), size, episode count, frames (the
        longest), policy ("mix" if several), and event_rate, start and monsters (each None
        where the episodes differ or the index predates the field)."""
        index = self.index
        ids = self.ids() if ids is None else list(ids)
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
                "start": _shared(entries, "start"), "monsters": _shared(entries, "monsters")}

    def next_id(self) -> str:
        """The id an automatic `write` takes now (another writer may take it first: only
        `write`, under the lock, allocates it)."""
        numbers = [int(i) for i in self._files() if i.isdigit()]
        return f"{max(numbers, default=-1) + 1:06d}"

    def write(self, episode: Episode, episode_id: str | None = None,
              overwrite: bool = False) -> str:
        """Store an episode and index it; return its id (the next number if None). The
        episode and index.json are checked before anything is written; safe to call from
        several processes at once (see the module docstring)."""
        episode.validate()
        with self._locked(fcntl.LOCK_EX):
            episodes = self._end_pending(*self._read_index())
            episode_id = self.next_id() if episode_id is None else episode_id
            path = self.path(episode_id)
            if path.exists() and not overwrite:
                raise ValueError(f"episode {episode_id!r} already exists in {self.root}; "
                                 f"pass overwrite=True or another id")
            self._write_index(episodes, pending=(episode_id,))
            try:
                save_episode(episode, path)
            except BaseException:  # the episode file is as it was: so must the index be
                self._write_index(episodes)
                raise
            self._write_index({**episodes, episode_id: {"id": episode_id,
                                                        **episode.summary()}})
        return episode_id

    def _end_pending(self, episodes: dict[str, dict], pending: list[str]) -> dict[str, dict]:
        """End the writes a dead writer left pending (the caller holds the lock, so no live
        one can be): index an episode file that reads, drop the id of one that does not
        (a damaged file stays, for `validate_all` to report). Returns the episodes."""
        if not pending:
            return episodes
        episodes = dict(episodes)
        for i in pending:
            try:
                episodes[i] = {"id": i, **load_episode(self.path(i)).summary()}
                outcome = "indexed the episode file found at its path"
            except EpisodeError as e:
                outcome = f"dropped the id: {e}"
            warnings.warn(f"{self.root}: a writer died while writing episode {i!r}; "
                          f"{outcome}", stacklevel=3)
        self._write_index(episodes)
        return episodes

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

    def rebuild_index(self) -> dict[str, dict]:
        """Re-read every episode file and rewrite index.json (untouched if any file is bad).
        The explicit repair: it ignores the old index, so it also replaces a malformed one."""
        with self._locked(fcntl.LOCK_EX):
            index = {i: {"id": i, **self.read(i).summary()} for i in self._files()}
            self._write_index(index)
        return index

    def validate_all(self) -> dict[str, str]:
        """id -> problem for every episode that fails to load or validate ({} = all good);
        also reports episodes missing from, or stale in, the index. Writes in flight (or
        left pending by a dead writer) are not episodes yet and are not checked."""
        problems = {}
        with self._locked(fcntl.LOCK_SH):
            index, pending = self._read_index()
            ids = self._settled(pending)
            for i in ids:
                try:
                    ep = self.read(i)
                    if index.get(i) != {"id": i, **ep.summary()}:
                        problems[i] = "index entry missing or stale (run rebuild_index)"
                except EpisodeError as e:
                    problems[i] = str(e)
            for i in sorted(set(index) - set(ids) - set(pending)):
                problems[i] = "in index.json but the file is missing"
        return problems


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
