"""The episode store: a directory of `<id>.npz` episodes (see `schema`) and `index.json`.
Writes are atomic (temp file + rename)."""

from __future__ import annotations

import json
from pathlib import Path

from ..atomic import atomic_write
from .schema import (FORMAT_VERSION, Episode, EpisodeError, check_id, load_episode,
                     save_episode)


# ----------------------------------------------------------------------------------------
# The store: a directory of episodes plus index.json
# ----------------------------------------------------------------------------------------


class EpisodeStore:
    """A directory of `<id>.npz` episodes and an `index.json` summary of them."""

    INDEX = "index.json"

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, episode_id: str) -> Path:
        check_id(episode_id)
        return self.root / f"{episode_id}.npz"

    def ids(self) -> list[str]:
        return sorted(p.stem for p in self.root.glob("*.npz") if not p.name.startswith("."))

    def __len__(self) -> int:
        return len(self.ids())

    @property
    def index(self) -> dict[str, dict]:
        """id -> summary (frames, size, engine, map, policy, seed, events, has_depth)."""
        path = self.root / self.INDEX
        if not path.exists():
            return {}
        try:
            return json.loads(path.read_text())["episodes"]
        except (ValueError, KeyError) as e:
            raise EpisodeError(f"cannot read store index {path}: {e}") from e

    def _write_index(self, episodes: dict[str, dict]) -> None:
        text = json.dumps({"format": FORMAT_VERSION, "episodes": dict(sorted(episodes.items()))},
                          indent=1)
        atomic_write(self.root / self.INDEX, lambda f: f.write(text.encode()))

    def describe(self, ids: list[str] | None = None) -> dict:
        """What episodes `ids` (default: all) are, in `config.DataConfig` fields, from the
        index: engine and map ("+"-joined if several), size, episode count, frames (the
        longest), policy ("mix" if several) and event_rate (None where the index predates it)."""
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
        rates = {e.get("event_rate") for e in entries}
        return {"engine": joined("engine"), "map": joined("map"), "size": sizes.pop()[0],
                "episodes": len(ids), "frames": max(e["frames"] for e in entries),
                "policy": policies.pop() if len(policies) == 1 else "mix",
                "event_rate": rates.pop() if len(rates) == 1 else None}

    def next_id(self) -> str:
        numbers = [int(i) for i in self.ids() if i.isdigit()]
        return f"{max(numbers, default=-1) + 1:06d}"

    def write(self, episode: Episode, episode_id: str | None = None,
              overwrite: bool = False) -> str:
        """Store an episode (validated first) and update the index; return its id."""
        episode_id = self.next_id() if episode_id is None else episode_id
        path = self.path(episode_id)
        if path.exists() and not overwrite:
            raise ValueError(f"episode {episode_id!r} already exists in {self.root}; "
                             f"pass overwrite=True or another id")
        index = self.index  # read first: a bad index must not leave a new unindexed file
        save_episode(episode, path)
        index[episode_id] = {"id": episode_id, **episode.summary()}
        self._write_index(index)
        return episode_id

    def read(self, episode_id: str) -> Episode:
        path = self.path(episode_id)
        if not path.exists():
            raise ValueError(f"no episode {episode_id!r} in {self.root}; it has "
                             f"{len(self)} episodes")
        return load_episode(path)

    def rebuild_index(self) -> dict[str, dict]:
        """Re-read every episode and rewrite index.json (untouched if any file is bad)."""
        index = {i: {"id": i, **self.read(i).summary()} for i in self.ids()}
        self._write_index(index)
        return index

    def validate_all(self) -> dict[str, str]:
        """id -> problem for every episode that fails to load or validate ({} = all good);
        also reports episodes missing from, or stale in, the index."""
        problems = {}
        index = self.index
        for i in self.ids():
            try:
                ep = self.read(i)
                if index.get(i) != {"id": i, **ep.summary()}:
                    problems[i] = "index entry missing or stale (run rebuild_index)"
            except EpisodeError as e:
                problems[i] = str(e)
        for i in sorted(set(index) - set(self.ids())):
            problems[i] = "in index.json but the file is missing"
        return problems
