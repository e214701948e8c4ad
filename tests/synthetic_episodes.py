"""Small synthetic episodes for the autoencoder and training tests (no engine needed).

Frames are smooth colour gradients with a moving square, so a tiny autoencoder can learn
them in a few dozen steps; poses and actions are valid (identity rotations, zero first action).
"""

from __future__ import annotations

import numpy as np

from worldlab.camera import ACTION_WIDTH, intrinsics_from_fov
from worldlab.episodes import Episode, EpisodeStore, PromptSegment, make_meta


def synthetic_rgb(t: int, size: int, seed: int) -> np.ndarray:
    """uint8 (t, size, size, 3): a colour gradient plus a square moving one pixel a frame."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    base = np.stack([xx, yy, 1 - xx * yy], -1) * rng.uniform(0.4, 1.0, 3)  # (h, w, 3)
    frames = np.repeat(base[None], t, 0)
    s = size // 4
    for i in range(t):
        x0 = (i + seed) % (size - s)
        frames[i, s:2 * s, x0:x0 + s] = rng.uniform(0, 1, 3)
    return (frames * 255).round().astype(np.uint8)


def synthetic_episode(t: int, size: int, seed: int) -> Episode:
    c2w = np.repeat(np.eye(4)[None], t, 0)
    c2w[:, 0, 3] = np.arange(t) * 0.25  # walk along +x
    K = np.repeat(intrinsics_from_fov(size, size, 90.0)[None], t, 0)
    actions = np.zeros((t, ACTION_WIDTH), np.float32)
    actions[1:, 0] = 0.25
    depth = np.full((t, size, size), 3.0, np.float32)
    depth[:, : size // 4] = np.inf  # sky
    prompts = [PromptSegment(0, "a grey room", "a marine", ""),
               PromptSegment(t // 2, "a grey room", "a marine", "an imp appears")]
    return Episode(rgb=synthetic_rgb(t, size, seed), depth=depth, c2w=c2w, K=K,
                   actions=actions, prompts=prompts,
                   meta=make_meta("synthetic", fps=10.0, seed=seed)).validate()


def synthetic_store(root, episodes: int = 3, t: int = 8, size: int = 32) -> EpisodeStore:
    store = EpisodeStore(root)
    for i in range(episodes):
        store.write(synthetic_episode(t, size, seed=i))
    return store
