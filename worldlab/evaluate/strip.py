"""A picture of open-loop play against the engine: one row per source (the engine, then each
world), one column per chosen step of the same held-out walk.

    strip = rollout_strip({"old": old_world, "new": new_world}, episode, at=(8, 32, 64))

Every world starts from the same true first chunk and is driven by the episode's own
actions and poses (`protocols.generate`), so the columns are the same moment of the walk.
"""

from __future__ import annotations

import numpy as np

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
