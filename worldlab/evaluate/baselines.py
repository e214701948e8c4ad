"""The trivial baselines every table carries: a world model that does not beat them has
learned nothing.

    repeat  the last frame the model was given, repeated
    warp    that frame forward-warped into each later pose with its depth and the known
            camera motion (holes keep the last frame's colour)

Shape legend: t frames, h w height/width.
"""

from __future__ import annotations

import numpy as np

from ..memory.cache3d import warp_frame


def repeat_baseline(last: np.ndarray, t: int) -> np.ndarray:
    """uint8 frame (h, w, 3) -> (t, h, w, 3), the same frame t times."""
    return np.repeat(last[None], t, axis=0)


def warp_baseline(episode, last: int, targets: range) -> np.ndarray:
    """Frame `last` of an episode forward-warped into each target pose: (t, h, w, 3)."""
    out = []
    for j in targets:
        rgb, _, mask = warp_frame(episode.rgb[last], episode.depth[last], episode.c2w[last],
                                  episode.c2w[j], episode.K[last], dst_K=episode.K[j], splat=1)
        out.append(np.where(mask[..., None], rgb, episode.rgb[last]))
    return np.stack(out)
