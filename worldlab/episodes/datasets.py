"""What feeds training: autoencoder latents cached per episode, windows of whole chunks
(`EpisodeClips`), and all frames of some episodes for the per-frame autoencoder.

Shape names: t time, c channels, h w height width, a action width, n chunks.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_write, remove_dead_temps
from .schema import Episode, EpisodeError, check_id
from .store import EpisodeStore


# ----------------------------------------------------------------------------------------
# Latent cache: autoencoder latents per episode, safetensors
# ----------------------------------------------------------------------------------------


class LatentCache:
    """`<root>/<episode id>.safetensors` holding `latents` (t, c, h', w') float16."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        remove_dead_temps(self.root)  # what an encoder killed mid-put left
        # read once: latents are small, reads are not; keyed by the file's stat, so a file
        # changed on disk is read (and checked) again
        self._memory: dict[str, tuple[tuple, np.ndarray]] = {}

    def _path(self, episode_id: str) -> Path:
        check_id(episode_id)
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
                latents = load_file(path)["latents"]
            except Exception as e:  # safetensors raises its own error types on damage
                raise EpisodeError(f"cannot read latent file {path}: {e}") from e
            if latents.dtype != np.float16 or latents.ndim != 4:
                found = f"{latents.dtype} {latents.shape}"
            elif not np.isfinite(latents).all():
                found = f"{int((~np.isfinite(latents)).sum())} non-finite values"
            else:
                found = None
            if found is not None:  # `put` writes only finite float16 (t, c, h', w') latents
                raise EpisodeError(f"latent file {path} holds {found}; expected finite "
                                   f"float16 (t, c, h', w') latents: the file is damaged")
            self._memory[episode_id] = key, latents
        return self._memory[episode_id][1]


def check_latent_frames(episode_id: str, latents: np.ndarray, frames: int) -> np.ndarray:
    """`latents` of an episode of `frames` frames, or a ValueError if the counts differ."""
    if len(latents) != frames:
        raise ValueError(f"latents of {episode_id!r} have {len(latents)} frames, the "
                         f"episode has {frames}")
    return latents


# ----------------------------------------------------------------------------------------
# Training windows
# ----------------------------------------------------------------------------------------


def clip_windows(store: EpisodeStore, clip_frames: int, chunk_frames: int, stride: int,
                 ids: list[str] | None = None) -> list[tuple[str, int]]:
    """(episode id, first frame) of every clip of `clip_frames` frames starting every
    `stride` frames of episodes `ids` (default: all, sorted), read from the store's index."""
    for n, v in (("clip_frames", clip_frames), ("chunk_frames", chunk_frames),
                 ("stride", stride)):
        if not (isinstance(v, int) and v > 0):
            raise ValueError(f"{n} must be a positive integer, got {v!r}")
    if clip_frames % chunk_frames or stride % chunk_frames:
        raise ValueError(f"clip_frames ({clip_frames}) and stride ({stride}) must be "
                         f"multiples of chunk_frames ({chunk_frames})")
    index = store.index
    ids = sorted(index) if ids is None else list(ids)
    unknown = [i for i in ids if i not in index]
    if unknown:
        raise ValueError(f"episode {unknown[0]!r} is not in the index of {store.root}")
    return [(i, s) for i in ids for s in range(0, index[i]["frames"] - clip_frames + 1, stride)]


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
        self.store = EpisodeStore.open(store)
        stride = clip_frames if stride is None else stride
        self.windows = clip_windows(self.store, clip_frames, chunk_frames, stride, ids)
        self.clip_frames, self.chunk_frames, self.stride = clip_frames, chunk_frames, stride
        self.latents = latents
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
            lat = check_latent_frames(episode_id, self.latents.get(episode_id), len(ep))
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


# ----------------------------------------------------------------------------------------
# Frames for the per-frame autoencoder
# ----------------------------------------------------------------------------------------


def load_frames(store: EpisodeStore, ids: list[str], depth: bool = False):
    """All frames of episodes `ids`: (uint8 rgb (n, h, w, 3), depth (n, h, w) or None).

    Filled one episode at a time into arrays sized from the index, so memory peaks at the
    frames plus one episode (not every episode's depth, labels and frames at once)."""
    if not ids:
        raise ValueError(f"no episodes asked for from {store.root}")
    index = store.index
    total = sum(index[i]["frames"] for i in ids)
    rgb = d = None
    at = 0
    for i in ids:
        ep = store.read(i)
        if len(ep) != index[i]["frames"]:
            raise ValueError(f"episode {i!r} has {len(ep)} frames, the index of "
                             f"{store.root} says {index[i]['frames']}")
        if depth and ep.depth is None:
            raise ValueError(f"depth was asked for but episode {i!r} has no depth")
        if rgb is None:
            rgb = np.empty((total, *ep.rgb.shape[1:]), np.uint8)
            d = np.empty((total, *ep.depth.shape[1:]), np.float32) if depth else None
        if ep.rgb.shape[1:] != rgb.shape[1:]:
            raise ValueError(f"episode {i!r} has frames of {ep.rgb.shape[1:]}, the first "
                             f"has {rgb.shape[1:]}")
        rgb[at:at + len(ep)] = ep.rgb
        if depth:
            d[at:at + len(ep)] = ep.depth
        at += len(ep)
    return rgb, d
