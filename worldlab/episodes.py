"""Episodes: the schema of one recorded play-through, its atomic on-disk store, and the
windowed torch Dataset that feeds training.

An episode of t frames holds (shape names: t time, h w height width, a action width,
c channels, n chunks):

    rgb       (t, h, w, 3) uint8
    depth     (t, h, w)    float32 metric z-depth, inf = no hit; None for imported real video
    c2w       (t, 4, 4)    float64 camera-to-world (conventions of `worldlab.camera`)
    K         (t, 3, 3)    float64 pixels, per frame (DOOM shears cy when looking up)
    actions   (t, a)       float32 in `camera.ACTION_FIELDS` order; actions[i] is the input
                           that produced frame i from frame i - 1, so actions[0] is zeros
    instance  (t, h, w)    int32 object ids, optional
    prompts   PromptSegments: the structured caption (scene / character / event), a new
              segment whenever the prompt changes; the first starts at frame 0
    events    engine events that fired (name, text, step)
    meta      engine, map, seed, policy, fps, units, size, created, worldlab version

On disk an episode is one `.npz` (arrays + a JSON header stored as uint8 bytes, so loading
never unpickles), written atomically; `index.json` summarises the store.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from .atomic import atomic_write
from .camera import ACTION_WIDTH, check_c2w, check_K
from .engines.base import Event

FORMAT_VERSION = 1
REQUIRED_META = ("engine", "fps", "units")
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class EpisodeError(ValueError):
    """A stored episode (or cache entry) that cannot be read; the message names the file."""


# ----------------------------------------------------------------------------------------
# Schema
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptSegment:
    """The structured caption in force from frame `start` until the next segment."""

    start: int
    scene: str = ""
    character: str = ""
    event: str = ""

    def caption(self) -> tuple[str, str, str]:
        return (self.scene, self.character, self.event)


def _expect_array(name: str, x, dtype, shape: tuple) -> None:
    """Raise unless x is an ndarray of `dtype` whose shape matches (None = any size)."""
    if not isinstance(x, np.ndarray):
        raise ValueError(f"Episode.{name} must be a numpy array, got {type(x).__name__}")
    ok = x.ndim == len(shape) and all(s is None or s == d for s, d in zip(shape, x.shape))
    if x.dtype != dtype or not ok:
        want = "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"Episode.{name} must be {np.dtype(dtype).name} {want}, "
                         f"got {x.dtype} {x.shape}")


@dataclass
class Episode:
    rgb: np.ndarray
    depth: np.ndarray | None
    c2w: np.ndarray
    K: np.ndarray
    actions: np.ndarray
    instance: np.ndarray | None = None
    prompts: list[PromptSegment] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rgb)

    @property
    def size(self) -> tuple[int, int]:
        return tuple(self.rgb.shape[1:3])

    def validate(self) -> "Episode":
        """Check every field; raise ValueError naming the field and what was expected."""
        _expect_array("rgb", self.rgb, np.uint8, (None, None, None, 3))
        t, h, w = self.rgb.shape[:3]
        if t < 1:
            raise ValueError(f"Episode.rgb must hold at least one frame, got t={t}")
        if self.depth is not None:
            _expect_array("depth", self.depth, np.float32, (t, h, w))
            if np.isnan(self.depth).any() or (self.depth <= 0).any():
                raise ValueError("Episode.depth must be positive z-depth (inf = no hit), "
                                 "found NaN or values <= 0")
        _expect_array("c2w", self.c2w, np.float64, (t, 4, 4))
        check_c2w(self.c2w, "Episode.c2w")
        _expect_array("K", self.K, np.float64, (t, 3, 3))
        for i, K in enumerate(self.K):
            check_K(K, f"Episode.K[{i}]")
        _expect_array("actions", self.actions, np.float32, (t, ACTION_WIDTH))
        if not np.isfinite(self.actions).all():
            raise ValueError("Episode.actions must be finite")
        if np.any(self.actions[0] != 0):
            raise ValueError(f"Episode.actions[0] must be zeros (no input precedes frame 0), "
                             f"got {self.actions[0].tolist()}")
        if self.instance is not None:
            _expect_array("instance", self.instance, np.int32, (t, h, w))
        self._validate_text(t)
        return self

    def _validate_text(self, t: int) -> None:
        starts = [p.start for p in self.prompts]
        if not all(isinstance(p, PromptSegment) for p in self.prompts):
            raise ValueError("Episode.prompts must be a list of PromptSegment")
        if starts and (starts[0] != 0 or starts[-1] >= t
                       or any(b <= a for a, b in zip(starts, starts[1:]))):
            raise ValueError(f"Episode.prompts starts must be strictly increasing from 0 and "
                             f"< t={t}, got {starts}")
        for e in self.events:
            if not (isinstance(e, Event) and 0 <= e.step < t):
                raise ValueError(f"Episode.events must be Events with 0 <= step < {t}, got {e!r}")
        if not isinstance(self.meta, dict):
            raise ValueError(f"Episode.meta must be a dict, got {type(self.meta).__name__}")
        missing = [k for k in REQUIRED_META if k not in self.meta]
        if missing:
            raise ValueError(f"Episode.meta is missing {missing}; expected keys "
                             f"{list(REQUIRED_META)}")
        try:
            json.dumps(self.meta)
        except TypeError as e:
            raise ValueError(f"Episode.meta must be JSON-serialisable: {e}") from None

    def caption_at(self, frame: int) -> PromptSegment:
        """The PromptSegment in force at `frame` (an empty caption if there are none)."""
        if not 0 <= frame < len(self):
            raise ValueError(f"frame must be in [0, {len(self)}), got {frame}")
        current = PromptSegment(0)
        for p in self.prompts:
            if p.start > frame:
                break
            current = p
        return current

    def summary(self) -> dict:
        m = self.meta
        return {"frames": len(self), "size": list(self.size), "engine": m.get("engine"),
                "map": m.get("map"), "policy": m.get("policy"), "seed": m.get("seed"),
                "events": [e.name for e in self.events], "has_depth": self.depth is not None}


def make_meta(engine: str, fps: float, units: str = "metres", **fields) -> dict:
    """Episode meta with the fields every episode carries (creation time, worldlab version)."""
    from . import __version__

    return {"engine": engine, "fps": fps, "units": units,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "worldlab": __version__, **fields}


def prompts_from_steps(prompts: list[str | None], scene: str, character: str
                       ) -> list[PromptSegment]:
    """Per-frame event prompts (None = unchanged) -> segments, one per change."""
    segments = [PromptSegment(0, scene, character, (prompts[0] or "") if prompts else "")]
    for i, p in enumerate(prompts[1:], start=1):
        if p is not None and p != segments[-1].event:
            segments.append(PromptSegment(i, scene, character, p))
    return segments


# ----------------------------------------------------------------------------------------
# One file per episode: npz arrays + a JSON header (no pickles)
# ----------------------------------------------------------------------------------------


def save_episode(episode: Episode, path: str | Path) -> None:
    """Validate and write one episode atomically to `path` (.npz)."""
    episode.validate()
    header = {"format": FORMAT_VERSION, "meta": episode.meta,
              "prompts": [dataclasses.asdict(p) for p in episode.prompts],
              "events": [dataclasses.asdict(e) for e in episode.events]}
    arrays = {"rgb": episode.rgb, "c2w": episode.c2w, "K": episode.K,
              "actions": episode.actions,
              "header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)}
    if episode.depth is not None:
        arrays["depth"] = episode.depth
    if episode.instance is not None:
        arrays["instance"] = episode.instance
    atomic_write(Path(path), lambda f: np.savez_compressed(f, **arrays))


def load_episode(path: str | Path) -> Episode:
    """Read and validate one episode; any damage raises EpisodeError naming the file."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        header = json.loads(arrays.pop("header").tobytes().decode())
        if header.get("format") != FORMAT_VERSION:
            raise ValueError(f"format {header.get('format')!r}, expected {FORMAT_VERSION}")
        episode = Episode(
            rgb=arrays["rgb"], depth=arrays.get("depth"), c2w=arrays["c2w"], K=arrays["K"],
            actions=arrays["actions"], instance=arrays.get("instance"),
            prompts=[PromptSegment(**p) for p in header["prompts"]],
            events=[Event(**e) for e in header["events"]], meta=header["meta"])
        return episode.validate()
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as e:
        raise EpisodeError(f"cannot read episode file {path}: {type(e).__name__}: {e}") from e


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
        if not isinstance(episode_id, str) or not _ID_RE.match(episode_id):
            raise ValueError(f"episode id must match {_ID_RE.pattern}, got {episode_id!r}")
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


# ----------------------------------------------------------------------------------------
# Latent cache: autoencoder latents per episode, safetensors
# ----------------------------------------------------------------------------------------


class LatentCache:
    """`<root>/<episode id>.safetensors` holding `latents` (t, c, h', w') float16."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        # read once: latents are small, reads are not; keyed by the file's stat, so a file
        # changed on disk is read (and checked) again
        self._memory: dict[str, tuple[tuple, np.ndarray]] = {}

    def _path(self, episode_id: str) -> Path:
        if not isinstance(episode_id, str) or not _ID_RE.match(episode_id):
            raise ValueError(f"episode id must match {_ID_RE.pattern}, got {episode_id!r}")
        return self.root / f"{episode_id}.safetensors"

    def has(self, episode_id: str) -> bool:
        return self._path(episode_id).exists()

    def put(self, episode_id: str, latents: np.ndarray) -> None:
        from safetensors.numpy import save

        if not (isinstance(latents, np.ndarray) and latents.dtype == np.float16
                and latents.ndim == 4):
            raise ValueError(f"latents must be a float16 (t, c, h', w') array, got "
                             f"{getattr(latents, 'dtype', type(latents))} "
                             f"{getattr(latents, 'shape', '')}")
        if not np.isfinite(latents).all():
            raise ValueError(f"latents for {episode_id!r} must be finite")
        blob = save({"latents": np.ascontiguousarray(latents)})
        atomic_write(self._path(episode_id), lambda f: f.write(blob))
        self._memory.pop(episode_id, None)

    def get(self, episode_id: str) -> np.ndarray:
        from safetensors.numpy import load_file

        path = self._path(episode_id)
        if not path.exists():
            raise ValueError(f"no latents for episode {episode_id!r} in {self.root}")
        stat = path.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        if self._memory.get(episode_id, (None,))[0] != key:
            try:
                self._memory[episode_id] = key, load_file(path)["latents"]
            except Exception as e:  # safetensors raises its own error types on damage
                raise EpisodeError(f"cannot read latent file {path}: {e}") from e
        return self._memory[episode_id][1]


# ----------------------------------------------------------------------------------------
# Training windows
# ----------------------------------------------------------------------------------------


class EpisodeClips(torch.utils.data.Dataset):
    """Clips of `clip_frames` frames, starting every `stride` frames on chunk boundaries.

    Item: rgb (t, 3, h, w) in [-1, 1] (or `latents` (t, c, h', w') from a LatentCache),
    depth (t, 1, h, w) if the episode has depth, c2w (t, 4, 4), K (t, 3, 3), actions (t, a),
    captions: n = t / chunk_frames (scene, character, event) at each chunk's first frame,
    episode (id), start (frame).
    """

    def __init__(self, store: EpisodeStore | str | Path, clip_frames: int, chunk_frames: int = 4,
                 stride: int | None = None, latents: LatentCache | None = None,
                 ids: list[str] | None = None, cache_episodes: int = 8):
        self.store = store if isinstance(store, EpisodeStore) else EpisodeStore(store)
        stride = clip_frames if stride is None else stride
        for n, v in (("clip_frames", clip_frames), ("chunk_frames", chunk_frames),
                     ("stride", stride)):
            if not (isinstance(v, int) and v > 0):
                raise ValueError(f"{n} must be a positive integer, got {v!r}")
        if clip_frames % chunk_frames or stride % chunk_frames:
            raise ValueError(f"clip_frames ({clip_frames}) and stride ({stride}) must be "
                             f"multiples of chunk_frames ({chunk_frames})")
        self.clip_frames, self.chunk_frames, self.stride = clip_frames, chunk_frames, stride
        self.latents = latents
        index = self.store.index
        ids = sorted(index) if ids is None else list(ids)
        unknown = [i for i in ids if i not in index]
        if unknown:
            raise ValueError(f"episode {unknown[0]!r} is not in the index of {self.store.root}")
        self.windows = [(i, s) for i in ids
                        for s in range(0, index[i]["frames"] - clip_frames + 1, stride)]
        self._cache: OrderedDict[str, Episode] = OrderedDict()
        self._cache_size = cache_episodes

    def __len__(self) -> int:
        return len(self.windows)

    def _episode(self, episode_id: str) -> Episode:
        # a small LRU: consecutive clips mostly come from the same episode
        if episode_id not in self._cache:
            self._cache[episode_id] = self.store.read(episode_id)
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(episode_id)
        return self._cache[episode_id]

    def preload(self) -> None:
        """Read every episode (and its latents) into memory now rather than on first use;
        needs cache_episodes >= the number of episodes to keep them."""
        for episode_id in dict.fromkeys(i for i, _ in self.windows):
            self._episode(episode_id)
            if self.latents is not None:
                self.latents.get(episode_id)

    def __getitem__(self, i: int) -> dict:
        episode_id, s = self.windows[i]
        ep = self._episode(episode_id)
        sl = slice(s, s + self.clip_frames)
        item = {"c2w": torch.from_numpy(ep.c2w[sl]).float(),  # (t, 4, 4)
                "K": torch.from_numpy(ep.K[sl]).float(),  # (t, 3, 3)
                "actions": torch.from_numpy(ep.actions[sl].copy()),  # (t, a)
                "captions": [ep.caption_at(f).caption()
                             for f in range(s, s + self.clip_frames, self.chunk_frames)],
                "episode": episode_id, "start": s}
        if self.latents is not None:
            lat = self.latents.get(episode_id)
            if len(lat) != len(ep):
                raise ValueError(f"latents of {episode_id!r} have {len(lat)} frames, the "
                                 f"episode has {len(ep)}")
            item["latents"] = torch.from_numpy(lat[sl].astype(np.float32))  # (t, c, h', w')
        else:
            rgb = torch.from_numpy(ep.rgb[sl]).permute(0, 3, 1, 2)  # (t, 3, h, w) uint8
            item["rgb"] = rgb.float() / 127.5 - 1.0
        if ep.depth is not None:
            item["depth"] = torch.from_numpy(ep.depth[sl].copy())[:, None]  # (t, 1, h, w)
        return item


def collate_clips(batch: list[dict]) -> dict:
    """Stack tensors into (b, ...); captions stay a list (b) of lists (n) of tuples."""
    keys = set(batch[0])
    for item in batch[1:]:
        if set(item) != keys:
            raise ValueError(f"clips in a batch must have the same fields, got {sorted(keys)} "
                             f"and {sorted(item)} (mixing episodes with and without depth?)")
    out = {}
    for k in batch[0]:
        values = [item[k] for item in batch]
        out[k] = torch.stack(values) if isinstance(values[0], torch.Tensor) else values
    return out
