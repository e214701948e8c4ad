"""The 3D cache's input for training clips, rendered once per store and kept beside it.

A memory fine-tune with the 3D cache (`memory.cache3d`) gives every training clip's last
chunk the render of the frames before it: fused into a point cache with the engine's depth
("oracle") or the depth head's ("own"), rendered into the chunk's cameras and encoded with
the start world's autoencoder, as `memory.stream.Stream` does in play. Rendering is the
slow part of such a run (about 0.15 s a clip on one core: half an hour for the 12,600 clips
of 600 walks), and it is the same for every training seed of a variant, so
`stored_cache3d_latents` keeps it in `<store>/cache3d/<key>.safetensors`, the key a hash of
everything the render depends on (the clips, the mode, the fusing stride and point budget,
the autoencoder's and the depth head's weights). A second seed reads the file; a changed
input makes a new key, never a stale read.

Shape legend: N clips, f frames per chunk, c h w latent channels and size.
"""

from __future__ import annotations

import hashlib
import json

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from ..atomic import atomic_write_bytes
from ..episodes import EpisodeStore
from ..memory.cache3d import PointCache
from ..memory.stream import CACHE_VOXEL_M, cache_latent

FOLDER = "cache3d"  # under the store


@torch.no_grad()
def cache3d_latents(store: EpisodeStore, windows: list[tuple[str, int]], clip_frames: int,
                    chunk_frames: int, autoencoder, mode: str, stride: int, depth_head=None,
                    progress=None, max_points: int | None = None) -> torch.Tensor:
    """The 3D-cache input of each clip's last chunk (N, f, c + 1, h, w) float16: the engine's
    frames before that chunk (every `stride`-th), fused (at most `max_points` points, as
    `memory.stream.Stream` keeps) with the engine's depth ("oracle")
    or the depth head's ("own"), rendered into its cameras and encoded (`cache_latent`,
    as `memory.stream.Stream` does in play). `progress(1)` after each clip."""
    f, out, current = chunk_frames, [], None
    device = next(autoencoder.parameters()).device
    for episode_id, start in windows:  # grouped by episode, starts increasing
        if episode_id != current:
            current, ep, fused = episode_id, store.read(episode_id), 0
            points, K = PointCache(CACHE_VOXEL_M, max_points), ep.K[0]
            depth = ep.depth if mode == "oracle" else depth_head.predict(ep.rgb)
        target = start + clip_frames - f  # the last chunk's first frame
        for i in range(fused, target):
            if i % stride == 0:
                points.fuse(ep.rgb[i], depth[i], ep.c2w[i], K)
        fused = target
        out.append(cache_latent(autoencoder, points, ep.c2w[target:target + f], K,
                                ep.rgb.shape[1], device)[0].half().cpu())
        if progress is not None:
            progress(1)
    return torch.stack(out)


def _weights_hash(module) -> str:
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def cache_key(windows, clip_frames: int, chunk_frames: int, autoencoder, mode: str,
              stride: int, depth_head=None, max_points: int | None = None) -> str:
    """What a render depends on, hashed: the clips, their sizes, the mode, the fusing
    stride and point budget, and the autoencoder's (and the own mode's depth head's)
    weights."""
    parts = {"windows": [list(w) for w in windows], "clip_frames": clip_frames,
             "chunk_frames": chunk_frames, "mode": mode, "stride": stride,
             "max_points": max_points, "autoencoder": _weights_hash(autoencoder),
             "depth_head": _weights_hash(depth_head) if mode == "own" else None}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def stored_cache3d_latents(store: EpisodeStore, windows: list[tuple[str, int]],
                           clip_frames: int, chunk_frames: int, autoencoder, mode: str,
                           stride: int, depth_head=None, progress=None,
                           max_points: int | None = None) -> torch.Tensor:
    """`cache3d_latents`, read from `<store>/cache3d/<key>.safetensors` when an earlier run
    rendered the same clips the same way, else rendered and written there (atomically)."""
    key = cache_key(windows, clip_frames, chunk_frames, autoencoder, mode, stride,
                    depth_head, max_points)
    path = store.root / FOLDER / f"{mode}-{key}.safetensors"
    if path.exists():
        latents = load_tensors(path.read_bytes())["latents"]
        if len(latents) == len(windows):
            print(f"3D-cache inputs of {len(windows)} clips read from {path}")
            return latents
    latents = cache3d_latents(store, windows, clip_frames, chunk_frames, autoencoder, mode,
                              stride, depth_head, progress, max_points)
    atomic_write_bytes(path, save_tensors({"latents": latents.contiguous()}))
    return latents
