"""Every training clip of a store held as tensors on one device (`ClipTensors`): the world
model's batches are gathered by index where the tensors live, with no reading per step.

`EpisodeClips` reads an episode (its pixels included) per item and `collate_clips` stacks
the items in Python, every step; on a GPU that, not the model, set the pace (5 steps/s).
Here the cached latents, the poses and the actions of all episodes are read once (the
pixels never: `EpisodeStore.read_track`) and concatenated into (F, ...) tensors; a clip is
the row of its first frame, its chunk captions are ids into `captions`, and a batch is one
gather. The numbers are those of `EpisodeClips` + `collate_clips` on the same clips.

Shape legend: F frames of all episodes, N clips, b batch, t frames per clip, n chunks per
clip, c h w latent channels and size, a action width.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .datasets import LatentCache, check_latent_frames, clip_windows
from .store import EpisodeStore


def _joined(arrays: list[np.ndarray], device: torch.device, dtype=None) -> torch.Tensor:
    """Concatenate on the host, convert, then copy to `device` once."""
    return torch.from_numpy(np.concatenate(arrays)).to(dtype=dtype).to(device)


class ClipTensors:
    """The clips of `EpisodeClips(store, clip_frames, chunk_frames, stride, latents, ids)`
    as tensors on `device`. `gather(indices)` gives the batch of those clips: latents
    (b, t, c, h, w) float32, c2w (b, t, 4, 4), actions (b, t, a) and caption_ids (b, n)
    into `captions`, the distinct (scene, character, event) captions in order of first use.
    `windows` ((episode id, first frame), grouped by episode) replaces those clips by a
    chosen subset of them.
    """

    def __init__(self, store: EpisodeStore | str | Path, latents: LatentCache, clip_frames: int,
                 chunk_frames: int = 4, stride: int | None = None,
                 ids: list[str] | None = None, device: str | torch.device = "cpu",
                 windows: list[tuple[str, int]] | None = None):
        store = EpisodeStore.open(store)
        stride = clip_frames if stride is None else stride
        self.windows = clip_windows(store, clip_frames, chunk_frames, stride, ids) \
            if windows is None else list(windows)
        if not self.windows:
            raise ValueError(f"no clip of {clip_frames} frames fits in the episodes of "
                             f"{store.root} that were asked for; record longer episodes or "
                             f"train on shorter clips (data.clip_chunks)")
        self.clip_frames, self.chunk_frames = clip_frames, chunk_frames
        self.device = torch.device(device)
        self.captions: list[tuple[str, str, str]] = []
        lat, c2w, actions, first, caption_ids = self._read(store, latents)
        self.latents = _joined(lat, self.device)  # (F, c, h, w) float16, as cached
        self.c2w = _joined(c2w, self.device, torch.float32)  # (F, 4, 4)
        self.actions = _joined(actions, self.device)  # (F, a) float32
        self.first = torch.tensor(first, device=self.device)  # (N,) row of each clip's frame 0
        self.caption_ids = torch.tensor(caption_ids, device=self.device)  # (N, n)
        self._frames = torch.arange(clip_frames, device=self.device)  # (t,)

    def _read(self, store: EpisodeStore, latents: LatentCache) -> tuple:
        """Per episode: latents, c2w, actions; per clip: first row and caption ids."""
        lat, c2w, actions, first, caption_ids = [], [], [], [], []
        vocabulary: dict[tuple[str, str, str], int] = {}
        rows, track, current = 0, None, None
        for episode_id, start in self.windows:  # grouped by episode, in order
            if episode_id != current:
                if track is not None:
                    rows += len(track)
                current, track = episode_id, store.read_track(episode_id)
                lat.append(check_latent_frames(episode_id, latents.get(episode_id),
                                               len(track)))
                c2w.append(track.c2w)
                actions.append(track.actions)
            first.append(rows + start)
            chunk_starts = range(start, start + self.clip_frames, self.chunk_frames)
            caption_ids.append([vocabulary.setdefault(track.caption_at(f).caption(),
                                                      len(vocabulary)) for f in chunk_starts])
        self.captions = list(vocabulary)
        return lat, c2w, actions, first, caption_ids

    def __len__(self) -> int:
        return len(self.windows)

    @property
    def nbytes(self) -> int:
        """Bytes the tensors take on their device."""
        return sum(t.numel() * t.element_size() for t in
                   (self.latents, self.c2w, self.actions, self.first, self.caption_ids))

    def gather(self, indices: list[int]) -> dict[str, torch.Tensor]:
        """The batch of clips `indices` (b of them), on the tensors' device."""
        idx = torch.as_tensor(indices, device=self.device)  # (b,)
        rows = self.first[idx, None] + self._frames  # (b, t)
        return {"latents": self.latents[rows].float(),  # (b, t, c, h, w)
                "c2w": self.c2w[rows],  # (b, t, 4, 4)
                "actions": self.actions[rows],  # (b, t, a)
                "caption_ids": self.caption_ids[idx]}  # (b, n)
