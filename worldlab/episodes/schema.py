"""The episode: the schema of one recorded play-through and its file format.

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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..atomic import atomic_write
from ..camera import ACTION_WIDTH, check_c2w, check_K
from ..engines.base import Event
from ..paths import VERSION

FORMAT_VERSION = 1
REQUIRED_META = ("engine", "fps", "units")
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_id(episode_id) -> str:
    """An episode id: letters, digits, `_.-`, not starting with a punctuation mark."""
    if not isinstance(episode_id, str) or not ID_RE.match(episode_id):
        raise ValueError(f"episode id must match {ID_RE.pattern}, got {episode_id!r}")
    return episode_id


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
            bad = np.isnan(self.depth) | (self.depth <= 0)  # (t, h, w)
            if bad.any():
                frames = np.flatnonzero(bad.any(axis=(1, 2)))
                raise ValueError(f"Episode.depth must be positive z-depth (inf = no hit), "
                                 f"found {int(bad.sum())} NaN or values <= 0 in {len(frames)} "
                                 f"of {t} frames, the first at frame {frames[0]}")
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
        _check_prompts(self.prompts, t)
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
        return segment_at(self.prompts, frame, len(self))

    def summary(self) -> dict:
        m = self.meta
        return {"frames": len(self), "size": list(self.size), "engine": m.get("engine"),
                "map": m.get("map"), "policy": m.get("policy"), "seed": m.get("seed"),
                "event_rate": m.get("event_rate"), "start": m.get("start"),
                "monsters": m.get("monsters"),
                # walls and the event schedule only where the meta has them: the entries
                # of stores recorded before stay current (validate_all compares them with
                # this summary)
                **{k: m[k] for k in ("walls", "event_every", "event_kinds") if k in m},
                "events": [e.name for e in self.events],
                "has_depth": self.depth is not None}


def _check_prompts(prompts: list, t: int) -> None:
    starts = [p.start for p in prompts]
    if not all(isinstance(p, PromptSegment) for p in prompts):
        raise ValueError("Episode.prompts must be a list of PromptSegment")
    if starts and (starts[0] != 0 or starts[-1] >= t
                   or any(b <= a for a, b in zip(starts, starts[1:]))):
        raise ValueError(f"Episode.prompts starts must be strictly increasing from 0 and "
                         f"< t={t}, got {starts}")


def segment_at(prompts: list[PromptSegment], frame: int, t: int) -> PromptSegment:
    """The segment of `prompts` in force at `frame` of t (an empty caption if none)."""
    if not 0 <= frame < t:
        raise ValueError(f"frame must be in [0, {t}), got {frame}")
    current = PromptSegment(0)
    for p in prompts:
        if p.start > frame:
            break
        current = p
    return current


@dataclass
class Track:
    """An episode without its pixels: what the world model trains on next to cached latents
    (poses, actions, prompts), read without decompressing a single frame (`load_track`)."""
    c2w: np.ndarray  # (t, 4, 4) float64
    actions: np.ndarray  # (t, a) float32
    prompts: list[PromptSegment] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.c2w)

    def caption_at(self, frame: int) -> PromptSegment:
        return segment_at(self.prompts, frame, len(self))


def make_meta(engine: str, fps: float, units: str = "metres", **fields) -> dict:
    """Episode meta with the fields every episode carries (creation time, worldlab version)."""
    return {"engine": engine, "fps": fps, "units": units,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "worldlab": VERSION, **fields}


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
    except Exception as e:  # damage surfaces as zlib, zipfile, numpy or json errors alike
        raise EpisodeError(f"cannot read episode file {path}: {type(e).__name__}: {e}") from e


def load_track(path: str | Path) -> Track:
    """The poses, actions and prompts of an episode file, checked as `Episode.validate`
    checks them; the pixel arrays are never read (an npz member is inflated on access)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            c2w, actions, header = z["c2w"], z["actions"], z["header"]
        header = json.loads(header.tobytes().decode())
        if header.get("format") != FORMAT_VERSION:
            raise ValueError(f"format {header.get('format')!r}, expected {FORMAT_VERSION}")
        _expect_array("c2w", c2w, np.float64, (None, 4, 4))
        check_c2w(c2w, "Episode.c2w")
        _expect_array("actions", actions, np.float32, (len(c2w), ACTION_WIDTH))
        if not np.isfinite(actions).all():
            raise ValueError("Episode.actions must be finite")
        prompts = [PromptSegment(**p) for p in header["prompts"]]
        _check_prompts(prompts, len(c2w))
        return Track(c2w, actions, prompts)
    except Exception as e:  # damage surfaces as zlib, zipfile, numpy or json errors alike
        raise EpisodeError(f"cannot read episode file {path}: {type(e).__name__}: {e}") from e
