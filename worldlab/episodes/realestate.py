"""Import RealEstate10K clips (real video with SLAM camera poses) as worldlab episodes.

A RealEstate10K camera file is a URL line, then one line per frame:

    timestamp_us fx fy cx cy k1 k2 r00 r01 r02 t0 r10 r11 r12 t1 r20 r21 r22 t2

with intrinsics normalised by the image width (fx, cx) and height (fy, cy), `k1 k2` unused
(zero), and a world-to-camera 3x4 matrix (row-major) in OpenCV camera axes (x right, y down,
z forward). The SLAM world frame follows the cameras, which film roughly level: its y axis
points down and z forward. worldlab's world is +z up, so we rotate the world once:

    world (ours) = RE10K_TO_WORLD @ world (RE10K):  x -> -y,  y -> -z,  z -> +x

i.e. a camera at identity in the RE10K world becomes `pose_from_heading(0, yaw=0)` (facing
+x, level). Translations keep the SLAM's arbitrary scale (meta `units` says so). There is no
depth. Actions are recovered with `camera.actions_from_poses` (yaw, pitch and horizontal
motion; roll and height are not actions); if any step exceeds the Action limits the actions
are left at zero and meta `actions` says why.

Shape names: t time, h w height width.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..camera import ACTION_WIDTH, actions_from_poses, actions_to_array, check_c2w, invert_pose
from .schema import Episode, PromptSegment, make_meta

# the world rotation described above, as a 4x4 acting on RE10K world points
RE10K_TO_WORLD = np.array([[0.0, 0.0, 1.0, 0.0],
                           [-1.0, 0.0, 0.0, 0.0],
                           [0.0, -1.0, 0.0, 0.0],
                           [0.0, 0.0, 0.0, 1.0]])
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def read_camera_file(path: str | Path) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """(url, timestamps (t,) int64 us, intrinsics (t, 4) normalised fx fy cx cy,
    w2c (t, 4, 4) float64) of a RealEstate10K camera file."""
    lines = [ln for ln in Path(path).read_text().splitlines() if ln.strip()]
    if len(lines) < 2:
        raise ValueError(f"{path}: expected a URL line and at least one camera line, got "
                         f"{len(lines)} lines")
    rows = []
    for n, line in enumerate(lines[1:], start=2):
        try:
            values = [float(v) for v in line.split()]
        except ValueError:
            values = []
        if len(values) != 19:
            raise ValueError(f"{path}:{n}: expected 19 numbers (timestamp, fx fy cx cy, 0 0, "
                             f"3x4 world-to-camera), got {line[:80]!r}")
        rows.append(values)
    rows = np.array(rows)  # (t, 19)
    w2c = np.tile(np.eye(4), (len(rows), 1, 1))
    w2c[:, :3, :] = rows[:, 7:].reshape(-1, 3, 4)
    return lines[0].strip(), rows[:, 0].astype(np.int64), rows[:, 1:5], w2c


def _load_frames(frames_dir: Path, t: int, size: int) -> tuple[np.ndarray, tuple, tuple]:
    """Centre-crop every frame to a square and resize: rgb (t, size, size, 3), the
    original (w, h) and the crop offset (x0, y0)."""
    from PIL import Image

    files = sorted(p for p in frames_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if len(files) != t:
        raise ValueError(f"{frames_dir}: expected {t} frames (one per camera line), found "
                         f"{len(files)} images")
    frames, shape = [], None
    for f in files:
        with Image.open(f) as im:
            im = im.convert("RGB")
            if shape not in (None, im.size):
                raise ValueError(f"{f}: frame size {im.size} differs from {shape}")
            shape = im.size
            w, h = im.size
            side = min(w, h)
            x0, y0 = (w - side) // 2, (h - side) // 2
            im = im.crop((x0, y0, x0 + side, y0 + side)).resize((size, size), Image.BOX)
            frames.append(np.asarray(im, dtype=np.uint8))
    return np.stack(frames), shape, (x0, y0)


def _recover_actions(c2w: np.ndarray) -> tuple[np.ndarray, str]:
    """(t, a) actions with actions[0] = 0, and a note for meta."""
    try:
        steps = actions_from_poses(c2w)
    except ValueError as e:  # a step beyond the Action limits (a cut or a SLAM jump)
        return np.zeros((len(c2w), ACTION_WIDTH), np.float32), f"zeros: {e}"
    actions = np.concatenate([np.zeros((1, ACTION_WIDTH), np.float32), actions_to_array(steps)])
    return actions, "recovered from poses (roll and height changes are not actions)"


def import_realestate10k(camera_txt: str | Path, frames_dir: str | Path, size: int) -> Episode:
    """One RealEstate10K clip -> an Episode of size x size frames (centre-cropped)."""
    if not (isinstance(size, int) and size > 0):
        raise ValueError(f"size must be a positive integer, got {size!r}")
    url, stamps, intr, w2c = read_camera_file(camera_txt)
    rgb, (w, h), (x0, y0) = _load_frames(Path(frames_dir), len(stamps), size)
    scale = size / min(w, h)
    K = np.zeros((len(stamps), 3, 3))
    K[:, 0, 0] = intr[:, 0] * w * scale
    K[:, 1, 1] = intr[:, 1] * h * scale
    K[:, 0, 2] = (intr[:, 2] * w - x0) * scale
    K[:, 1, 2] = (intr[:, 3] * h - y0) * scale
    K[:, 2, 2] = 1.0
    c2w = check_c2w(RE10K_TO_WORLD @ invert_pose(w2c), "RealEstate10K pose")  # (t, 4, 4)
    actions, note = _recover_actions(c2w)
    fps = float(1e6 / np.median(np.diff(stamps))) if len(stamps) > 1 else 30.0
    meta = make_meta("realestate10k", fps, units="SLAM scale (not metres)", map=url,
                     seed=None, policy="video", size=size, actions=note,
                     source=str(camera_txt), timestamps_us=stamps.tolist())
    return Episode(rgb=rgb, depth=None, c2w=c2w, K=K, actions=actions,
                   prompts=[PromptSegment(0, "a real indoor or outdoor scene", "a camera", "")],
                   meta=meta).validate()
