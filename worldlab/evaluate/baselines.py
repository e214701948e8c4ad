"""The trivial baselines every table carries: a world model that does not beat them has
learned nothing.

    repeat     the last frame the model was given, repeated
    warp       that frame forward-warped into each later pose with its depth and the known
               camera motion (holes keep the last frame's colour)
    view warp  the same move without splatting's gaps (`cache3d.view_warp`, what a painting
               world's sample.paint_view paints with its own depth), with the engine's:
               a reference for what geometry alone gives, reported beside warp-last

Shape legend: t frames, h w height/width.
"""

from __future__ import annotations

import numpy as np

from ..memory.cache3d import view_warp, warp_frame


def repeat_baseline(last: np.ndarray, t: int) -> np.ndarray:
    """uint8 frame (h, w, 3) -> (t, h, w, 3), the same frame t times."""
    return np.repeat(last[None], t, axis=0)


def warp_baseline(episode, last: int, targets: range) -> np.ndarray:
    """Frame `last` of an episode forward-warped into each target pose: (t, h, w, 3)."""
    return warp_to_poses(episode.rgb[last], episode.depth[last], episode.c2w[last],
                         episode.K[last], episode.c2w[list(targets)],
                         episode.K[list(targets)])


def warp_to_poses(rgb: np.ndarray, depth: np.ndarray, c2w: np.ndarray, K: np.ndarray,
                  poses: np.ndarray, dst_K: np.ndarray | None = None) -> np.ndarray:
    """One RGB-D frame (h, w, 3) uint8 with depth (h, w), camera-to-world `c2w` and
    intrinsics `K`, forward-warped into each camera-to-world pose of `poses` (t, 4, 4)
    (intrinsics `dst_K` (t, 3, 3), default K): (t, h, w, 3); holes keep the frame's colour."""
    out = []
    for j, pose in enumerate(poses):
        warped, _, mask = warp_frame(rgb, depth, c2w, pose, K, splat=1,
                                     dst_K=K if dst_K is None else dst_K[j])
        out.append(np.where(mask[..., None], warped, rgb))
    return np.stack(out)


def view_warp_baseline(episode, last: int, targets: range) -> np.ndarray:
    """Frame `last` of an episode moved into each target pose without gaps (`view_warp`,
    nearest colours, the engine's depth): (t, h, w, 3); what it did not see keeps the
    frame's colour."""
    rgb = episode.rgb[last]
    out = []
    for t in targets:
        moved, _, seen = view_warp(rgb, episode.depth[last], episode.c2w[last],
                                   episode.c2w[t], episode.K[t])
        out.append(np.where(seen[..., None], moved, rgb))
    return np.stack(out)
