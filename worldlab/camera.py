"""Cameras, poses, rays and actions: the conventions of worldlab, stated once.

Conventions (every engine converts to these at its boundary and nowhere else):

- A pose is camera-to-world `c2w`, a 4x4 float64 matrix: `x_world = c2w @ x_cam`.
- Camera axes are OpenCV's: x right, y down, z forward (the optical axis).
- The world is right-handed with +z up. Heading (yaw) is measured in degrees
  counter-clockwise from +x seen from above (0 = +x "east", 90 = +y "north"), as in DOOM.
  Pitch is degrees above the horizon (positive looks up). Roll is always 0 for a player.
- Units are metres. Intrinsics `K` are in pixels of the stored resolution, pixel centres at
  integer + 0.5 (so the image spans [0, W] x [0, H]).
- Depth is metric z-depth (distance along the optical axis), `inf` where nothing was hit.

Shape names: t time, h w height width, n points.

The canonical `Action` moves the player in its own horizontal frame (metres per step) and
turns it (degrees per step); `integrate_actions` turns actions into poses and
`actions_from_poses` recovers them. Trajectory builders return both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

# ----------------------------------------------------------------------------------------
# Validation: errors name the bad value and what was expected
# ----------------------------------------------------------------------------------------


def _finite(name: str, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        bad = x[~np.isfinite(x)].ravel()[:3]
        raise ValueError(f"{name} must be finite, got non-finite values {bad.tolist()}")
    return x


def check_c2w(c2w: np.ndarray, name: str = "c2w", atol: float = 1e-5) -> np.ndarray:
    """Validate a (..., 4, 4) camera-to-world pose; return it as float64."""
    c2w = np.asarray(c2w, dtype=np.float64)
    if c2w.shape[-2:] != (4, 4):
        raise ValueError(f"{name} must have shape (..., 4, 4), got {c2w.shape}")
    c2w = _finite(name, c2w)
    R = c2w[..., :3, :3]
    err = np.abs(R @ np.swapaxes(R, -1, -2) - np.eye(3)).max(initial=0.0)
    if err > atol:
        raise ValueError(f"{name} rotation is not orthonormal (max |R R^T - I| = {err:.3g})")
    det = np.linalg.det(R)
    if np.any(det < 0):
        raise ValueError(f"{name} rotation is a reflection (det = {det.min():.3g}, expected +1)")
    bottom = c2w[..., 3, :]
    if np.abs(bottom - np.array([0, 0, 0, 1.0])).max(initial=0.0) > atol:
        raise ValueError(f"{name} last row must be [0, 0, 0, 1], got {bottom.reshape(-1, 4)[0]}")
    return c2w


def check_K(K: np.ndarray, name: str = "K") -> np.ndarray:
    """Validate a 3x3 pinhole intrinsics matrix; return it as float64."""
    K = np.asarray(K, dtype=np.float64)
    if K.shape != (3, 3):
        raise ValueError(f"{name} must have shape (3, 3), got {K.shape}")
    K = _finite(name, K)
    if K[0, 0] <= 0 or K[1, 1] <= 0:
        raise ValueError(f"{name} focal lengths must be positive, got fx={K[0, 0]}, fy={K[1, 1]}")
    if not np.allclose(K[2], [0, 0, 1]) or K[1, 0] != 0:
        raise ValueError(f"{name} must be upper-triangular with last row [0, 0, 1], got {K}")
    return K


# ----------------------------------------------------------------------------------------
# Intrinsics
# ----------------------------------------------------------------------------------------


def intrinsics_from_fov(width: int, height: int, fov_x_deg: float,
                        fov_y_deg: float | None = None) -> np.ndarray:
    """Pinhole K for a horizontal field of view (and vertical; default square pixels)."""
    for n, v in (("width", width), ("height", height)):
        if not (isinstance(v, (int, np.integer)) and v > 0):
            raise ValueError(f"{n} must be a positive integer, got {v!r}")
    fovs = [fov_x_deg] + ([fov_y_deg] if fov_y_deg is not None else [])
    for f in fovs:
        if not (np.isfinite(f) and 0 < f < 180):
            raise ValueError(f"field of view must be in (0, 180) degrees, got {f!r}")
    fx = 0.5 * width / math.tan(math.radians(fov_x_deg) / 2)
    fy = fx if fov_y_deg is None else 0.5 * height / math.tan(math.radians(fov_y_deg) / 2)
    return np.array([[fx, 0, width / 2], [0, fy, height / 2], [0, 0, 1]], dtype=np.float64)


def fov_from_intrinsics(K: np.ndarray, width: int, height: int) -> tuple[float, float]:
    """(horizontal, vertical) field of view in degrees of a centred pinhole camera."""
    K = check_K(K)
    return (math.degrees(2 * math.atan(0.5 * width / K[0, 0])),
            math.degrees(2 * math.atan(0.5 * height / K[1, 1])))


def scale_intrinsics(K: np.ndarray, sx: float, sy: float | None = None) -> np.ndarray:
    """K for an image resized by (sx, sy) (pixel-centre convention kept)."""
    K = check_K(K).copy()
    sy = sx if sy is None else sy
    if not (np.isfinite(sx) and np.isfinite(sy) and sx > 0 and sy > 0):
        raise ValueError(f"scale factors must be finite and positive, got sx={sx!r}, sy={sy!r}")
    K[0] *= sx
    K[1] *= sy
    return K


# ----------------------------------------------------------------------------------------
# Projection, unprojection, relative poses
# ----------------------------------------------------------------------------------------


def pixel_grid(height: int, width: int) -> np.ndarray:
    """Pixel-centre coordinates (h, w, 2) as (u, v) = (column + 0.5, row + 0.5)."""
    v, u = np.meshgrid(np.arange(height) + 0.5, np.arange(width) + 0.5, indexing="ij")
    return np.stack([u, v], axis=-1)


def unproject(uv: np.ndarray, depth: np.ndarray, K: np.ndarray, c2w: np.ndarray) -> np.ndarray:
    """Pixels (..., 2) with z-depth (...) -> world points (..., 3); a pixel with `inf`
    depth (nothing hit) gives a point of three `inf` coordinates, so `np.isfinite` masks it."""
    K, c2w = check_K(K), check_c2w(c2w)
    uv, depth = np.asarray(uv, dtype=np.float64), np.asarray(depth, dtype=np.float64)
    if uv.shape[-1] != 2 or uv.shape[:-1] != depth.shape:
        raise ValueError(f"uv must be (..., 2) matching depth (...), got {uv.shape} and "
                         f"{depth.shape}")
    far = np.isinf(depth)
    d = np.where(far, 1.0, depth)  # inf * 0 would be NaN, and NaN spreads through the matmul
    x = (uv[..., 0] - K[0, 2] - K[0, 1] * (uv[..., 1] - K[1, 2]) / K[1, 1]) / K[0, 0]
    y = (uv[..., 1] - K[1, 2]) / K[1, 1]
    cam = np.stack([x * d, y * d, d], axis=-1)  # (..., 3)
    return np.where(far[..., None], np.inf, cam @ c2w[:3, :3].T + c2w[:3, 3])


def project(points: np.ndarray, K: np.ndarray, c2w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World points (..., 3) -> (pixels (..., 2), z-depth (...)). Depth <= 0 is behind."""
    K, c2w = check_K(K), check_c2w(c2w)
    points = _finite("points", points)
    if points.shape[-1] != 3:
        raise ValueError(f"points must have shape (..., 3), got {points.shape}")
    R, t = c2w[:3, :3], c2w[:3, 3]
    # flat (n, 3) @ (3, 3): one BLAS call (a batched (..., m, 3) matmul is ~10x slower)
    cam = (points - t).reshape(-1, 3) @ R  # R^T (p - t)
    uvw = cam @ K.T
    w = uvw[:, 2].copy()  # contiguous: dividing column by column is ~3x faster than (n, 2) / (n, 1)
    uv = np.empty((len(cam), 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(uvw[:, 0], w, out=uv[:, 0])
        np.divide(uvw[:, 1], w, out=uv[:, 1])
    return uv.reshape(points.shape[:-1] + (2,)), cam[:, 2].reshape(points.shape[:-1])


def unproject_depth(depth: np.ndarray, K: np.ndarray, c2w: np.ndarray) -> np.ndarray:
    """A depth map (h, w) -> world points (h, w, 3); inf depth gives inf points (see
    `unproject`)."""
    depth = np.asarray(depth, dtype=np.float64)
    if depth.ndim != 2:
        raise ValueError(f"depth must be (h, w), got {depth.shape}")
    return unproject(pixel_grid(*depth.shape), depth, K, c2w)


def relative_pose(c2w_from: np.ndarray, c2w_to: np.ndarray) -> np.ndarray:
    """Pose of camera `to` in the frame of camera `from`: inv(c2w_from) @ c2w_to."""
    a, b = check_c2w(c2w_from, "c2w_from"), check_c2w(c2w_to, "c2w_to")
    return invert_pose(a) @ b


def invert_pose(c2w: np.ndarray) -> np.ndarray:
    """Exact inverse of a rigid (..., 4, 4) transform."""
    c2w = np.asarray(c2w, dtype=np.float64)
    out = np.zeros_like(c2w)
    Rt = np.swapaxes(c2w[..., :3, :3], -1, -2)
    out[..., :3, :3] = Rt
    out[..., :3, 3] = -(Rt @ c2w[..., :3, 3:4])[..., 0]
    out[..., 3, 3] = 1.0
    return out


# ----------------------------------------------------------------------------------------
# Rays and Plücker coordinates
# ----------------------------------------------------------------------------------------


def ray_directions(K: np.ndarray, c2w: np.ndarray, height: int, width: int,
                   normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """World-space ray origins and directions (h, w, 3) through every pixel centre.

    With normalize=False the direction has unit z-depth (it hits the point at depth 1),
    which is what `open3d.t.geometry.RaycastingScene.create_rays_pinhole` returns.
    """
    c2w = check_c2w(c2w)
    points = unproject(pixel_grid(height, width), np.ones((height, width)), K, c2w)
    origins = np.broadcast_to(c2w[:3, 3], points.shape).copy()
    dirs = points - origins
    if normalize:
        dirs /= np.linalg.norm(dirs, axis=-1, keepdims=True)
    return origins, dirs


def plucker(origins: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """Plücker coordinates (..., 6) = (d, o x d) with d normalised.

    The moment o x d is the same for every point o on the ray, so the embedding describes
    the ray itself, not where along it the camera sits.
    """
    o, d = _finite("origins", origins), _finite("directions", directions)
    if o.shape != d.shape or o.shape[-1] != 3:
        raise ValueError(f"origins and directions must both be (..., 3), got {o.shape}, "
                         f"{d.shape}")
    d = d / np.linalg.norm(d, axis=-1, keepdims=True)
    return np.concatenate([d, np.cross(o, d)], axis=-1)


def plucker_image(K: np.ndarray, c2w: np.ndarray, height: int, width: int) -> np.ndarray:
    """Per-pixel Plücker rays (h, w, 6) of a camera."""
    return plucker(*ray_directions(K, c2w, height, width))


# ----------------------------------------------------------------------------------------
# Headings and poses
# ----------------------------------------------------------------------------------------


def pose_from_heading(position, yaw_deg: float, pitch_deg: float = 0.0) -> np.ndarray:
    """c2w of a player at `position` (metres) facing `yaw` with `pitch`, no roll."""
    p = _finite("position", position)
    if p.shape != (3,):
        raise ValueError(f"position must have shape (3,), got {p.shape}")
    if not abs(pitch_deg) < 90:
        raise ValueError(f"pitch must be in (-90, 90) degrees, got {pitch_deg!r}")
    y, q = math.radians(yaw_deg), math.radians(pitch_deg)
    forward = np.array([math.cos(q) * math.cos(y), math.cos(q) * math.sin(y), math.sin(q)])
    right = np.array([math.sin(y), -math.cos(y), 0.0])  # forward x up, horizontal
    down = np.cross(forward, right)
    c2w = np.eye(4)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = right, down, forward, p
    return c2w


def heading_from_pose(c2w: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(position, yaw degrees in (-180, 180], pitch degrees) of a roll-free pose."""
    c2w = check_c2w(c2w)
    f = c2w[:3, 2]
    yaw = math.degrees(math.atan2(f[1], f[0]))
    yaw = 180.0 if yaw <= -180.0 else yaw  # atan2(-0.0, -1) is -180: keep (-180, 180]
    pitch = math.degrees(math.asin(float(np.clip(f[2], -1, 1))))
    return c2w[:3, 3].copy(), yaw, pitch


def wrap_degrees(a):
    """Wrap angles to [-180, 180)."""
    return (np.asarray(a) + 180.0) % 360.0 - 180.0


# ----------------------------------------------------------------------------------------
# The canonical action
# ----------------------------------------------------------------------------------------

BUTTONS: tuple[str, ...] = ("attack", "use", "jump")
ACTION_FIELDS: tuple[str, ...] = ("forward", "right", "yaw", "pitch") + BUTTONS
ACTION_WIDTH = len(ACTION_FIELDS)  # a
MAX_MOVE_M = 2.0  # metres per step; more is a teleport, not a step
MAX_TURN_DEG = 90.0  # degrees per step
_LIMIT_SLACK = 1 + 1e-9  # relative: actions recovered from poses carry float rounding


@dataclass(frozen=True)
class Action:
    """One step of player input, the same for every engine.

    forward, right: metres to move this step in the player's horizontal frame (negative =
    back / left). yaw: degrees to turn left (counter-clockwise from above). pitch: degrees
    to look up. buttons: named buttons held this step, a subset of `BUTTONS`.
    """

    forward: float = 0.0
    right: float = 0.0
    yaw: float = 0.0
    pitch: float = 0.0
    buttons: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self):
        for name, limit in (("forward", MAX_MOVE_M), ("right", MAX_MOVE_M),
                            ("yaw", MAX_TURN_DEG), ("pitch", MAX_TURN_DEG)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
                raise ValueError(f"Action.{name} must be a number, got {v!r}")
            if not (math.isfinite(v) and abs(v) <= limit * _LIMIT_SLACK):
                raise ValueError(f"Action.{name} must be finite with |{name}| <= {limit}, "
                                 f"got {v!r}")
            object.__setattr__(self, name, float(v))
        if isinstance(self.buttons, str):
            raise ValueError(f"Action.buttons must be a collection of names, got the string "
                             f"{self.buttons!r}; expected e.g. {{'attack'}}")
        try:
            buttons = frozenset(self.buttons)
        except TypeError:
            raise ValueError(f"Action.buttons must be a collection of names, got "
                             f"{self.buttons!r}") from None
        unknown = sorted(b for b in buttons if b not in BUTTONS)
        if unknown:
            raise ValueError(f"unknown button {unknown[0]!r}; expected a subset of {BUTTONS}")
        object.__setattr__(self, "buttons", buttons)

    def to_vector(self) -> np.ndarray:
        """(a,) float32 in the order of ACTION_FIELDS; buttons are 0/1."""
        return np.array([self.forward, self.right, self.yaw, self.pitch]
                        + [float(b in self.buttons) for b in BUTTONS], dtype=np.float32)

    @classmethod
    def from_vector(cls, v) -> "Action":
        v = np.asarray(v, dtype=np.float64)
        if v.shape != (ACTION_WIDTH,):
            raise ValueError(f"action vector must have shape ({ACTION_WIDTH},) "
                             f"{ACTION_FIELDS}, got {v.shape}")
        return cls(*v[:4], buttons=frozenset(b for b, x in zip(BUTTONS, v[4:]) if x > 0.5))

    def to_dict(self) -> dict:
        return {"forward": self.forward, "right": self.right, "yaw": self.yaw,
                "pitch": self.pitch, "buttons": sorted(self.buttons)}

    @classmethod
    def from_dict(cls, d: dict) -> "Action":
        if not isinstance(d, dict):
            raise ValueError(f"an action must be a dict, got {d!r}")
        unknown = sorted(set(d) - {"forward", "right", "yaw", "pitch", "buttons"})
        if unknown:
            raise ValueError(f"unknown action field {unknown[0]!r}; expected "
                             f"forward, right, yaw, pitch, buttons")
        return cls(**d)


def actions_to_array(actions) -> np.ndarray:
    """A list of Actions -> (t, a) float32."""
    return np.stack([a.to_vector() for a in actions]) if len(actions) else \
        np.zeros((0, ACTION_WIDTH), np.float32)


def step_pose(c2w: np.ndarray, action: Action) -> np.ndarray:
    """Apply one action to a pose: turn first, then move along the new heading."""
    pos, yaw, pitch = heading_from_pose(c2w)
    yaw, pitch = yaw + action.yaw, pitch + action.pitch
    y = math.radians(yaw)
    pos = pos + action.forward * np.array([math.cos(y), math.sin(y), 0.0]) \
        + action.right * np.array([math.sin(y), -math.cos(y), 0.0])
    return pose_from_heading(pos, yaw, pitch)


def integrate_actions(c2w0: np.ndarray, actions) -> np.ndarray:
    """Poses (t + 1, 4, 4) visited by playing `actions` from `c2w0` (included first)."""
    poses = [check_c2w(c2w0, "c2w0")]
    for a in actions:
        poses.append(step_pose(poses[-1], a))
    return np.stack(poses)


def actions_from_poses(c2w: np.ndarray) -> list[Action]:
    """Recover the t - 1 actions between consecutive roll-free poses (t, 4, 4).

    Inverse of `integrate_actions` for everything a pose can show (movement and turning);
    buttons are not visible in poses and come back empty. Vertical motion is ignored.
    """
    c2w = check_c2w(c2w)
    if c2w.ndim != 3 or len(c2w) < 1:
        raise ValueError(f"c2w must be (t, 4, 4), got {c2w.shape}")
    out = []
    for a, b in zip(c2w[:-1], c2w[1:]):
        pa, ya, qa = heading_from_pose(a)
        pb, yb, qb = heading_from_pose(b)
        y = math.radians(yb)
        d = pb - pa
        out.append(Action(forward=float(d[0] * math.cos(y) + d[1] * math.sin(y)),
                          right=float(d[0] * math.sin(y) - d[1] * math.cos(y)),
                          yaw=float(wrap_degrees(yb - ya)), pitch=qb - qa))
    return out


# ----------------------------------------------------------------------------------------
# Trajectories: actions and the poses they visit
# ----------------------------------------------------------------------------------------


@dataclass
class Trajectory:
    """A scripted path: `actions` (t) and the poses `c2w` (t + 1, 4, 4) they visit.

    `revisits` lists (i, j) pose indices, i < j, where the path comes back to the position
    of pose i at step j; for symmetric returns the heading matches too.
    """

    name: str
    actions: list[Action]
    c2w: np.ndarray
    revisits: list[tuple[int, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.actions)


def _from_poses(name: str, c2w: np.ndarray, revisits=()) -> Trajectory:
    actions = actions_from_poses(c2w)
    return Trajectory(name, actions, integrate_actions(c2w[0], actions), list(revisits))


def _check_steps(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _start(c2w0) -> np.ndarray:
    return pose_from_heading(np.zeros(3), 0.0) if c2w0 is None else check_c2w(c2w0)


def straight(steps: int, step_m: float = 0.25, c2w0=None) -> Trajectory:
    """Walk forward `steps` steps of `step_m` metres."""
    _check_steps("steps", steps)
    return Trajectory("straight", [Action(forward=step_m)] * steps,
                      integrate_actions(_start(c2w0), [Action(forward=step_m)] * steps))


def turn_around(steps: int, degrees: float = 360.0, c2w0=None) -> Trajectory:
    """Turn in place by `degrees` in `steps` equal steps (a full turn revisits the start)."""
    _check_steps("steps", steps)
    acts = [Action(yaw=degrees / steps)] * steps
    revisits = [(0, steps)] if abs(abs(degrees) - 360.0) < 1e-9 else []
    return Trajectory("turn_around", acts, integrate_actions(_start(c2w0), acts), revisits)


def orbit(radius: float, steps: int, degrees: float = 360.0, c2w0=None) -> Trajectory:
    """Circle a point `radius` metres ahead, always facing it (strafe right, turn left)."""
    _check_steps("steps", steps)
    start = _start(c2w0)
    p0, yaw0, _ = heading_from_pose(start)
    y0 = math.radians(yaw0)
    centre = p0 + radius * np.array([math.cos(y0), math.sin(y0), 0.0])
    poses = []
    for k in range(steps + 1):
        yaw = yaw0 + degrees * k / steps
        y = math.radians(yaw)
        poses.append(pose_from_heading(centre - radius * np.array([math.cos(y), math.sin(y), 0]),
                                       yaw))
    revisits = [(0, steps)] if abs(abs(degrees) - 360.0) < 1e-9 else []
    return _from_poses("orbit", np.stack(poses), revisits)


def leave_and_return(outbound: list[Action], c2w0=None) -> Trajectory:
    """Symmetric revisit: play `outbound`, then retrace it backwards pose by pose.

    The second half inverts the first: step t + k of the return stands exactly where step
    t - k of the outbound stood, facing the same way, so the last pose is the first.
    """
    out = integrate_actions(_start(c2w0), outbound)
    t = len(outbound)
    poses = np.concatenate([out, out[-2::-1]]) if t else out
    return _from_poses("leave_and_return", poses, [(k, 2 * t - k) for k in range(t)])


def asymmetric_return(leg_steps: int, step_m: float = 0.25, turn_steps: int = 6,
                      c2w0=None) -> Trajectory:
    """Revisit the start from another direction: walk a square loop turning left.

    Four legs of `leg_steps` steps, each followed (but the last) by a 90-degree left turn
    over `turn_steps` steps. The player ends where it started facing 90 degrees right of
    its first heading, so it sees the start region from a new direction.
    """
    _check_steps("leg_steps", leg_steps)
    _check_steps("turn_steps", turn_steps)
    leg = [Action(forward=step_m)] * leg_steps
    turn = [Action(yaw=90.0 / turn_steps)] * turn_steps
    acts = leg + turn + leg + turn + leg + turn + leg
    return Trajectory("asymmetric_return", acts, integrate_actions(_start(c2w0), acts),
                      [(0, len(acts))])


# ----------------------------------------------------------------------------------------
# Pose errors
# ----------------------------------------------------------------------------------------


def rotation_error_deg(R_a: np.ndarray, R_b: np.ndarray) -> np.ndarray:
    """Geodesic angle (degrees) between rotations (..., 3, 3)."""
    R_a, R_b = _finite("R_a", R_a), _finite("R_b", R_b)
    if R_a.shape[-2:] != (3, 3) or R_a.shape != R_b.shape:
        raise ValueError(f"rotations must both be (..., 3, 3), got {R_a.shape}, {R_b.shape}")
    cos = (np.trace(np.swapaxes(R_a, -1, -2) @ R_b, axis1=-2, axis2=-1) - 1) / 2
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def translation_error(c2w_a: np.ndarray, c2w_b: np.ndarray) -> np.ndarray:
    """Euclidean distance (metres) between the camera centres of two poses (..., 4, 4)."""
    a, b = check_c2w(c2w_a, "c2w_a"), check_c2w(c2w_b, "c2w_b")
    return np.linalg.norm(a[..., :3, 3] - b[..., :3, 3], axis=-1)


def align_umeyama(src: np.ndarray, dst: np.ndarray, with_scale: bool = False):
    """(s, R, t) minimising |dst - (s R src + t)|^2 over points (n, 3) (Umeyama 1991)."""
    src, dst = _finite("src", src), _finite("dst", dst)
    if src.shape != dst.shape or src.ndim != 2 or src.shape[1] != 3:
        raise ValueError(f"point sets must both be (n, 3), got {src.shape}, {dst.shape}")
    mu_s, mu_d = src.mean(0), dst.mean(0)
    xs, xd = src - mu_s, dst - mu_d
    U, S, Vt = np.linalg.svd(xd.T @ xs / len(src))
    D = np.eye(3)
    if np.linalg.det(U) * np.linalg.det(Vt) < 0:
        D[2, 2] = -1  # no reflections
    R = U @ D @ Vt
    var = (xs ** 2).sum() / len(src)
    s = float(np.trace(np.diag(S) @ D) / var) if with_scale and var > 0 else 1.0
    return s, R, mu_d - s * R @ mu_s


def absolute_trajectory_error(c2w_est: np.ndarray, c2w_gt: np.ndarray,
                              with_scale: bool = False) -> float:
    """RMSE (metres) of camera centres after aligning the estimate to ground truth."""
    est, gt = check_c2w(c2w_est, "c2w_est"), check_c2w(c2w_gt, "c2w_gt")
    if est.shape != gt.shape or est.ndim != 3:
        raise ValueError(f"trajectories must both be (t, 4, 4), got {est.shape}, {gt.shape}")
    s, R, t = align_umeyama(est[:, :3, 3], gt[:, :3, 3], with_scale)
    aligned = s * est[:, :3, 3] @ R.T + t
    return float(np.sqrt(((aligned - gt[:, :3, 3]) ** 2).sum(-1).mean()))
