"""Pictures against the engine: one row per source (the engine, then each world or
autoencoder), one column per chosen frame.

    strip = rollout_strip({"old": old_world, "new": new_world}, episode, at=(8, 32, 64))
    strip = reconstruction_strip({"2x": ae2x, "4x": ae4x}, rgb, scale=3)

In a rollout strip every world starts from the same true first chunk and is driven by the
episode's own actions and poses (`generation.generate`), so the columns are the same moment
of the walk. A reconstruction strip shows what each autoencoder keeps of the same frames,
magnified (each pixel a `scale` x `scale` block) so that pixel-level texture is visible.
"""

from __future__ import annotations

import numpy as np

from ..model.autoencoder import VideoAutoencoder, frames_to_tensor, reconstruct, tensor_to_frames
from ..pretrained import World
from ..viz import frame_grid
from .generation import generate


def rollout_frames(worlds: dict[str, World], episode, at=(8, 32, 64)) -> dict[str, np.ndarray]:
    """{"engine": frames, name: frames, ...}: uint8 (len(at), h, w, 3), frame `s` of `at`
    being the s-th frame after the context chunk (1 = the first generated frame)."""
    at = list(at)
    if not at or any(not isinstance(s, int) or s < 1 for s in at):
        raise ValueError(f"at must be steps >= 1 after the context chunk, got {at!r}")
    out = {}
    for name, world in worlds.items():
        f = world.chunk_frames
        horizon = -(-max(at) // f) * f  # whole chunks
        if len(episode) < f + horizon:
            raise ValueError(f"episode has {len(episode)} frames; step {max(at)} needs "
                             f"{f + horizon}")
        gen = generate(world, episode, 0, f, f + horizon)  # frames f .. f + horizon - 1
        out.setdefault("engine", episode.rgb[[f + s - 1 for s in at]])
        out[name] = gen[[s - 1 for s in at]]
    return out


def rollout_strip(worlds: dict[str, World], episode, at=(8, 32, 64), pad: int = 2
                  ) -> np.ndarray:
    """uint8 image: rows engine, then each world in order; columns the steps `at`."""
    rows = rollout_frames(worlds, episode, at)
    return frame_grid(np.concatenate(list(rows.values())), cols=len(at), pad=pad)


def reconstruction_strip(autoencoders: dict[str, VideoAutoencoder], rgb: np.ndarray,
                         scale: int = 3, pad: int = 2) -> np.ndarray:
    """uint8 image: rows the frames rgb (n, h, w, 3) uint8, then each autoencoder's
    reconstruction of them in order; columns the frames; every pixel a scale x scale block."""
    rgb = np.asarray(rgb)
    if rgb.ndim != 4 or rgb.shape[-1] != 3 or rgb.dtype != np.uint8 or not len(rgb):
        raise ValueError(f"rgb must be non-empty uint8 (n, h, w, 3), got {rgb.dtype} "
                         f"{rgb.shape}")
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ValueError(f"scale must be an int >= 1, got {scale!r}")
    x = frames_to_tensor(rgb)
    rows = [rgb, *(tensor_to_frames(reconstruct(ae, x)) for ae in autoencoders.values())]
    big = np.concatenate(rows).repeat(scale, axis=1).repeat(scale, axis=2)
    return frame_grid(big, cols=len(rgb), pad=pad)
