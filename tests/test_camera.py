"""Camera conventions: projection round trips, rays against open3d, Plücker invariants,
actions <-> poses, trajectory builders, pose errors, and loud failures on bad input."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worldlab import camera as cam
from worldlab.camera import Action

# derandomize: hypothesis draws the same examples on every run, like a fixed seed
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    """A uniformly random proper rotation (3, 3) from the QR of a Gaussian matrix."""
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))  # make the factorisation unique (uniform on O(3))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]  # reflection -> rotation
    return q


def random_c2w(rng: np.random.Generator) -> np.ndarray:
    c2w = np.eye(4)
    c2w[:3, :3] = random_rotation(rng)
    c2w[:3, 3] = rng.normal(scale=3.0, size=3)
    return c2w


def random_K(rng: np.random.Generator, width: int, height: int, skew: bool = True) -> np.ndarray:
    fx, fy = rng.uniform(20, 200, size=2)
    cx, cy = rng.uniform(0.3, 0.7) * width, rng.uniform(0.3, 0.7) * height
    s = rng.uniform(-2, 2) if skew else 0.0
    return np.array([[fx, s, cx], [0, fy, cy], [0, 0, 1.0]])


def rot_z(deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


# ----------------------------------------------------------------------------------------
# Projection and unprojection
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_project_unproject_round_trip(seed):
    rng = np.random.default_rng(seed)
    K, c2w = random_K(rng, 64, 48), random_c2w(rng)
    uv = rng.uniform([0, 0], [64, 48], size=(7, 5, 2))
    depth = rng.uniform(0.1, 50.0, size=(7, 5))
    points = cam.unproject(uv, depth, K, c2w)  # (7, 5, 3)
    uv2, depth2 = cam.project(points, K, c2w)
    np.testing.assert_allclose(uv2, uv, atol=1e-9)
    np.testing.assert_allclose(depth2, depth, rtol=1e-12)
    # and the other way round: world points in front of the camera survive the trip
    p_cam = np.c_[rng.normal(size=(20, 2)), rng.uniform(0.5, 20, size=20)]
    points = p_cam @ c2w[:3, :3].T + c2w[:3, 3]
    np.testing.assert_allclose(cam.unproject(*cam.project(points, K, c2w), K, c2w), points,
                               atol=1e-9)


def test_principal_point_projects_along_optical_axis():
    K = cam.intrinsics_from_fov(64, 48, 90.0)
    c2w = cam.pose_from_heading(np.array([1.0, 2.0, 3.0]), yaw_deg=90.0)  # facing +y
    uv, z = cam.project(np.array([1.0, 7.0, 3.0]), K, c2w)  # 5 m straight ahead
    np.testing.assert_allclose(uv, [32.0, 24.0], atol=1e-12)
    assert z == pytest.approx(5.0)


def test_unproject_depth_shape_and_pixel_centres():
    K, c2w = cam.intrinsics_from_fov(4, 3, 60.0), np.eye(4)
    pts = cam.unproject_depth(np.full((3, 4), 2.0), K, c2w)  # (h, w, 3)
    assert pts.shape == (3, 4, 3)
    np.testing.assert_allclose(pts[..., 2], 2.0)
    uv, _ = cam.project(pts, K, c2w)
    np.testing.assert_allclose(uv[0, 0], [0.5, 0.5], atol=1e-12)  # corner pixel's centre
    np.testing.assert_allclose(uv, cam.pixel_grid(3, 4), atol=1e-12)


def test_unproject_inf_depth_gives_inf_points_as_documented():
    K, c2w = cam.intrinsics_from_fov(4, 3, 60.0), cam.pose_from_heading(np.ones(3), 30.0)
    depth = np.full((3, 4), 2.0)
    depth[1, 2] = np.inf  # nothing hit there
    with np.errstate(all="raise"):  # no invalid-value arithmetic either
        pts = cam.unproject_depth(depth, K, c2w)
    assert np.isposinf(pts[1, 2]).all()
    assert np.isfinite(np.delete(pts.reshape(-1, 3), 1 * 4 + 2, axis=0)).all()


@pytest.mark.parametrize("yaw", [180.0, -180.0, 540.0, -179.999, 179.999, 0.0])
def test_heading_yaw_is_in_the_documented_range(yaw):
    _, got, _ = cam.heading_from_pose(cam.pose_from_heading(np.zeros(3), yaw))
    assert -180.0 < got <= 180.0
    assert np.cos(np.radians(got - yaw)) == pytest.approx(1.0)  # the same heading


def test_relative_and_inverse_pose():
    rng = np.random.default_rng(7)
    a, b = random_c2w(rng), random_c2w(rng)
    np.testing.assert_allclose(cam.invert_pose(a) @ a, np.eye(4), atol=1e-12)
    np.testing.assert_allclose(a @ cam.relative_pose(a, b), b, atol=1e-12)


# ----------------------------------------------------------------------------------------
# Rays against open3d
# ----------------------------------------------------------------------------------------


def test_open3d_uses_pixel_centres_like_us():
    """open3d's pinhole rays go through pixel centres (u + 0.5, v + 0.5), our convention too.

    Checked directly: at identity extrinsics the ray of pixel (row 0, col 0) is
    K^-1 (0.5, 0.5, 1), so no half-pixel shift of K is needed in the comparison below.
    """
    o3d = pytest.importorskip("open3d")
    K = np.array([[10.0, 0, 2.0], [0, 10.0, 1.5], [0, 0, 1]])
    rays = o3d.t.geometry.RaycastingScene.create_rays_pinhole(
        o3d.core.Tensor(K), o3d.core.Tensor(np.eye(4)), 4, 3).numpy()  # (h, w, 6)
    np.testing.assert_allclose(rays[0, 0, 3:], [(0.5 - 2) / 10, (0.5 - 1.5) / 10, 1], atol=1e-6)
    np.testing.assert_allclose(rays[2, 3, 3:], [(3.5 - 2) / 10, (2.5 - 1.5) / 10, 1], atol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_rays_match_open3d(seed):
    o3d = pytest.importorskip("open3d")
    rng = np.random.default_rng(seed)
    h, w = 12, 16
    K, c2w = random_K(rng, w, h, skew=False), random_c2w(rng)
    # open3d's extrinsic is world-to-camera; its direction has unit camera z (unnormalised)
    rays = o3d.t.geometry.RaycastingScene.create_rays_pinhole(
        o3d.core.Tensor(K), o3d.core.Tensor(cam.invert_pose(c2w)), w, h).numpy()
    origins, dirs = cam.ray_directions(K, c2w, h, w, normalize=False)  # (h, w, 3) each
    assert origins.shape == dirs.shape == rays[..., :3].shape
    # open3d computes in float32: compare relative to the ray length
    np.testing.assert_allclose(origins, rays[..., :3], atol=1e-5 * (1 + np.abs(c2w[:3, 3]).max()))
    np.testing.assert_allclose(dirs, rays[..., 3:], atol=1e-5)
    # the unnormalised direction reaches z-depth 1: it projects back to its own pixel
    uv, z = cam.project(origins + dirs, K, c2w)
    np.testing.assert_allclose(z, 1.0, atol=1e-12)
    np.testing.assert_allclose(uv, cam.pixel_grid(h, w), atol=1e-9)
    _, unit = cam.ray_directions(K, c2w, h, w)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=-1), 1.0, atol=1e-12)


# ----------------------------------------------------------------------------------------
# Plücker coordinates
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_plucker_moment_is_o_cross_d_and_invariant_along_ray(seed):
    rng = np.random.default_rng(seed)
    o, d = rng.normal(size=(10, 3)), rng.normal(size=(10, 3))
    p = cam.plucker(o, d)  # (10, 6)
    unit = d / np.linalg.norm(d, axis=-1, keepdims=True)
    np.testing.assert_allclose(p[:, :3], unit, atol=1e-12)
    np.testing.assert_allclose(p[:, 3:], np.cross(o, unit), atol=1e-12)
    np.testing.assert_allclose((p[:, :3] * p[:, 3:]).sum(-1), 0.0, atol=1e-12)  # d . m = 0
    s = rng.uniform(-5, 5, size=(10, 1))
    np.testing.assert_allclose(cam.plucker(o + s * d, d), p, atol=1e-12)
    np.testing.assert_allclose(cam.plucker(o, 3.0 * d), p, atol=1e-12)  # scale-free in d


def test_plucker_image_of_camera():
    rng = np.random.default_rng(3)
    K, c2w = random_K(rng, 8, 6), random_c2w(rng)
    img = cam.plucker_image(K, c2w, 6, 8)
    assert img.shape == (6, 8, 6)
    # every ray passes through the camera centre, so the moment is c x d for every pixel
    np.testing.assert_allclose(img[..., 3:], np.cross(c2w[:3, 3], img[..., :3]), atol=1e-12)


# ----------------------------------------------------------------------------------------
# Actions <-> poses
# ----------------------------------------------------------------------------------------

_move = st.floats(-cam.MAX_MOVE_M, cam.MAX_MOVE_M, allow_nan=False)
_turn = st.floats(-cam.MAX_TURN_DEG, cam.MAX_TURN_DEG, allow_nan=False)
_pitch = st.floats(-10.0, 10.0, allow_nan=False)  # 8 steps stay inside (-90, 90)
_buttons = st.frozensets(st.sampled_from(cam.BUTTONS))
actions_st = st.builds(Action, forward=_move, right=_move, yaw=_turn, pitch=_pitch,
                       buttons=_buttons)


def _close(a: Action, b: Action, atol: float = 1e-7) -> bool:
    return np.allclose(a.to_vector()[:4].astype(np.float64),
                       [b.forward, b.right, b.yaw, b.pitch], atol=atol)


@SETTINGS
@given(actions=st.lists(actions_st, max_size=8), yaw0=st.floats(-180, 180),
       pitch0=st.floats(-20, 20))
def test_integrate_then_recover_actions(actions, yaw0, pitch0):
    c2w0 = cam.pose_from_heading(np.array([1.0, -2.0, 1.5]), yaw0, pitch0)
    poses = cam.integrate_actions(c2w0, actions)  # (t + 1, 4, 4)
    assert poses.shape == (len(actions) + 1, 4, 4)
    back = cam.actions_from_poses(poses)
    assert len(back) == len(actions)
    for a, b in zip(actions, back):
        assert b.buttons == frozenset()  # buttons are invisible in poses
        np.testing.assert_allclose([b.forward, b.right, b.yaw, b.pitch],
                                   [a.forward, a.right, a.yaw, a.pitch], atol=1e-8)
    # and replaying the recovered actions visits the same poses
    np.testing.assert_allclose(cam.integrate_actions(c2w0, back), poses, atol=1e-8)


def test_step_pose_hand_worked():
    c2w0 = cam.pose_from_heading(np.zeros(3), 0.0)  # at the origin facing +x
    c2w1 = cam.step_pose(c2w0, Action(forward=1.0, right=0.5, yaw=90.0))
    pos, yaw, pitch = cam.heading_from_pose(c2w1)
    # turn left to face +y first, then 1 m forward (+y) and 0.5 m right (+x)
    np.testing.assert_allclose(pos, [0.5, 1.0, 0.0], atol=1e-12)
    assert (yaw, pitch) == (pytest.approx(90.0), pytest.approx(0.0))


def test_pose_from_heading_axes():
    c2w = cam.pose_from_heading(np.zeros(3), yaw_deg=0.0)
    # OpenCV camera axes in a z-up world: x right = -y world, y down = -z, z forward = +x
    np.testing.assert_allclose(c2w[:3, :3], [[0, 0, 1], [-1, 0, 0], [0, -1, 0]], atol=1e-12)


@SETTINGS
@given(a=actions_st)
def test_action_round_trips(a):
    assert Action.from_dict(a.to_dict()) == a
    assert Action.from_dict(json.loads(json.dumps(a.to_dict()))) == a
    v = a.to_vector()
    assert v.shape == (cam.ACTION_WIDTH,) and v.dtype == np.float32
    b = Action.from_vector(v)  # float32 storage rounds the numbers, nothing else
    assert b.buttons == a.buttons and _close(b, a, atol=1e-4)
    assert Action.from_vector(b.to_vector()) == b  # exact once in float32
    assert np.array_equal(cam.actions_to_array([a, b]), np.stack([v, v]))


# ----------------------------------------------------------------------------------------
# Trajectory builders
# ----------------------------------------------------------------------------------------


def _assert_consistent(traj: cam.Trajectory):
    """Poses are exactly what the actions produce from the first pose."""
    assert traj.c2w.shape == (len(traj) + 1, 4, 4)
    np.testing.assert_allclose(cam.integrate_actions(traj.c2w[0], traj.actions), traj.c2w,
                               atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_leave_and_return_is_symmetric(seed):
    rng = np.random.default_rng(seed)
    outbound = [Action(forward=rng.uniform(0, 0.5), right=rng.uniform(-0.2, 0.2),
                       yaw=rng.uniform(-20, 20), pitch=rng.uniform(-3, 3)) for _ in range(9)]
    c2w0 = cam.pose_from_heading(np.array([2.0, 1.0, 1.5]), 40.0)
    traj = cam.leave_and_return(outbound, c2w0)
    _assert_consistent(traj)
    assert len(traj) == 18 and len(traj.revisits) == 9
    np.testing.assert_allclose(traj.c2w[-1], c2w0, atol=1e-9)
    for i, j in traj.revisits:
        assert i < j
        np.testing.assert_allclose(traj.c2w[j], traj.c2w[i], atol=1e-9)
    # the way back undoes each turn of the way out, in reverse order
    np.testing.assert_allclose([a.yaw for a in traj.actions[9:]],
                               [-a.yaw for a in outbound[::-1]], atol=1e-9)


def test_asymmetric_return_comes_back_from_another_direction():
    c2w0 = cam.pose_from_heading(np.array([0.0, 0.0, 1.5]), 10.0)
    traj = cam.asymmetric_return(leg_steps=8, step_m=0.25, turn_steps=6, c2w0=c2w0)
    _assert_consistent(traj)
    assert traj.revisits == [(0, len(traj))]
    (p0, y0, _), (p1, y1, _) = cam.heading_from_pose(c2w0), cam.heading_from_pose(traj.c2w[-1])
    np.testing.assert_allclose(p1, p0, atol=1e-9)
    assert abs(cam.wrap_degrees(y1 - y0)) >= 90.0 - 1e-9
    # it actually went somewhere: the far corner of a 2 m square
    far = np.linalg.norm(traj.c2w[:, :3, 3] - p0, axis=-1).max()
    assert far == pytest.approx(2 * math.sqrt(2))


@pytest.mark.parametrize("degrees", [360.0, -180.0])
def test_orbit_keeps_facing_the_centre(degrees):
    c2w0 = cam.pose_from_heading(np.array([1.0, 1.0, 1.5]), 30.0)
    traj = cam.orbit(radius=2.0, steps=24, degrees=degrees, c2w0=c2w0)
    _assert_consistent(traj)
    centre = c2w0[:3, 3] + 2.0 * c2w0[:3, 2]
    to_centre = centre - traj.c2w[:, :3, 3]  # (t + 1, 3)
    np.testing.assert_allclose(np.linalg.norm(to_centre, axis=-1), 2.0, atol=1e-9)
    np.testing.assert_allclose(to_centre / 2.0, traj.c2w[:, :3, 2], atol=1e-9)
    assert traj.revisits == ([(0, 24)] if degrees == 360.0 else [])
    if degrees == 360.0:
        np.testing.assert_allclose(traj.c2w[-1], c2w0, atol=1e-9)


def test_turn_around_revisits_and_stays_put():
    c2w0 = cam.pose_from_heading(np.array([3.0, 0.0, 1.5]), -45.0, 5.0)
    traj = cam.turn_around(12, c2w0=c2w0)
    _assert_consistent(traj)
    assert traj.revisits == [(0, 12)]
    np.testing.assert_allclose(traj.c2w[-1], c2w0, atol=1e-9)
    np.testing.assert_allclose(traj.c2w[:, :3, 3], np.broadcast_to(c2w0[:3, 3], (13, 3)))
    half = cam.turn_around(6, degrees=180.0, c2w0=c2w0)
    assert half.revisits == []
    # a half turn about world z is a half turn whatever the pitch (arccos is coarse near -1)
    assert cam.rotation_error_deg(half.c2w[-1, :3, :3], c2w0[:3, :3]) == pytest.approx(
        180.0, abs=1e-5)
    assert np.degrees(np.arccos(half.c2w[-1, :3, 2] @ c2w0[:3, 2])) == pytest.approx(
        180.0 - 2 * 5.0)  # but the view axes, both 5 deg up, are 170 deg apart


def test_straight_walks_forward():
    traj = cam.straight(10, step_m=0.3)
    _assert_consistent(traj)
    np.testing.assert_allclose(traj.c2w[-1, :3, 3], [3.0, 0, 0], atol=1e-12)


# ----------------------------------------------------------------------------------------
# Pose errors and intrinsics
# ----------------------------------------------------------------------------------------


def test_rotation_and_translation_errors_hand_worked():
    assert cam.rotation_error_deg(np.eye(3), rot_z(30.0)) == pytest.approx(30.0)
    assert cam.rotation_error_deg(rot_z(-170.0), rot_z(170.0)) == pytest.approx(20.0)
    assert cam.rotation_error_deg(rot_z(12.0), rot_z(12.0)) == pytest.approx(0.0, abs=1e-5)
    a, b = np.eye(4), np.eye(4)
    b[:3, 3] = [3.0, 4.0, 0.0]
    assert cam.translation_error(a, b) == pytest.approx(5.0)


def test_ate_after_rigid_and_similarity_alignment():
    rng = np.random.default_rng(0)
    gt = cam.orbit(2.0, 20, degrees=270.0).c2w  # (21, 4, 4), planar but not collinear
    gt[:, 2, 3] += np.linspace(0, 1, len(gt))  # and not planar
    T = random_c2w(rng)
    moved = T @ gt  # the same trajectory in another world frame
    assert cam.absolute_trajectory_error(moved, gt) == pytest.approx(0.0, abs=1e-9)
    scaled = moved.copy()
    scaled[:, :3, 3] *= 2.5
    assert cam.absolute_trajectory_error(scaled, gt) > 0.5  # a rigid fit cannot undo scale
    assert cam.absolute_trajectory_error(scaled, gt, with_scale=True) == pytest.approx(
        0.0, abs=1e-9)
    # two points at +-2 m versus +-1 m: the best rigid fit leaves 1 m on each
    est, ref = np.stack([np.eye(4)] * 2), np.stack([np.eye(4)] * 2)
    est[:, 0, 3], ref[:, 0, 3] = [-2.0, 2.0], [-1.0, 1.0]
    assert cam.absolute_trajectory_error(est, ref) == pytest.approx(1.0)
    assert cam.absolute_trajectory_error(est, ref, with_scale=True) == pytest.approx(0.0)


def test_intrinsics_fov_round_trip_and_golden():
    K = cam.intrinsics_from_fov(64, 48, 90.0)
    np.testing.assert_allclose(K, [[32, 0, 32], [0, 32, 24], [0, 0, 1]], atol=1e-12)
    fx, fy = cam.fov_from_intrinsics(K, 64, 48)
    assert fx == pytest.approx(90.0)
    assert fy == pytest.approx(math.degrees(2 * math.atan(24 / 32)))  # 73.74 square pixels
    for fov_x, fov_y in [(60.0, None), (90.0, 64.0), (120.0, 100.0)]:
        K = cam.intrinsics_from_fov(160, 120, fov_x, fov_y)
        got = cam.fov_from_intrinsics(K, 160, 120)
        assert got[0] == pytest.approx(fov_x)
        if fov_y is not None:
            assert got[1] == pytest.approx(fov_y)


def test_scale_intrinsics_keeps_pixel_centres():
    K = cam.intrinsics_from_fov(64, 48, 90.0)
    K2 = cam.scale_intrinsics(K, 0.5)
    # a world point lands on the same fraction of the image at either resolution
    uv, _ = cam.project(np.array([0.3, -0.2, 1.0]), K, np.eye(4))
    uv2, _ = cam.project(np.array([0.3, -0.2, 1.0]), K2, np.eye(4))
    np.testing.assert_allclose(uv2, uv * 0.5, atol=1e-12)


# ----------------------------------------------------------------------------------------
# Bad input: ValueError naming the bad value
# ----------------------------------------------------------------------------------------


def _reflection() -> np.ndarray:
    m = np.eye(4)
    m[0, 0] = -1.0
    return m


def _sheared() -> np.ndarray:
    m = np.eye(4)
    m[0, 1] = 0.1
    return m


def _nan_pose() -> np.ndarray:
    m = np.eye(4)
    m[1, 3] = np.nan
    return m


@pytest.mark.parametrize("call, match", [
    (lambda: cam.check_c2w(_nan_pose()), r"c2w must be finite.*nan"),
    (lambda: cam.check_c2w(_sheared()), r"not orthonormal"),
    (lambda: cam.check_c2w(_reflection()), r"reflection \(det = -1"),
    (lambda: cam.check_c2w(np.eye(3)), r"\(\.\.\., 4, 4\), got \(3, 3\)"),
    (lambda: cam.check_c2w(np.diag([1, 1, 1, 2.0])), r"last row must be \[0, 0, 0, 1\]"),
    (lambda: cam.check_K(np.diag([0.0, 10.0, 1.0])), r"positive, got fx=0\.0"),
    (lambda: cam.check_K(np.diag([10.0, -5.0, 1.0])), r"fy=-5\.0"),
    (lambda: cam.check_K(np.eye(3)[:2]), r"\(3, 3\), got \(2, 3\)"),
    (lambda: cam.check_K(np.diag([np.inf, 1.0, 1.0])), r"K must be finite.*inf"),
    (lambda: cam.unproject(np.zeros((5, 2)), np.ones(4), np.eye(3), np.eye(4)),
     r"\(5, 2\) and \(4,\)"),
    (lambda: cam.project(np.zeros((4, 2)), np.eye(3), np.eye(4)), r"\(\.\.\., 3\), got \(4, 2\)"),
    (lambda: cam.project(np.full(3, np.nan), np.eye(3), np.eye(4)), r"points must be finite"),
    (lambda: cam.unproject_depth(np.ones(5), np.eye(3), np.eye(4)), r"\(h, w\), got \(5,\)"),
    (lambda: cam.plucker(np.zeros((2, 3)), np.ones((3, 3))), r"\(2, 3\), \(3, 3\)"),
    (lambda: cam.pose_from_heading(np.zeros(3), 0.0, 90.0), r"pitch .* got 90\.0"),
    (lambda: cam.pose_from_heading(np.zeros(2), 0.0), r"position .* got \(2,\)"),
    (lambda: cam.intrinsics_from_fov(64, 48, 180.0), r"\(0, 180\) degrees, got 180\.0"),
    (lambda: cam.intrinsics_from_fov(0, 48, 90.0), r"width must be a positive integer, got 0"),
    (lambda: cam.intrinsics_from_fov(64, 4.5, 90.0), r"height .* got 4\.5"),
    (lambda: cam.scale_intrinsics(np.eye(3), -0.5), r"finite and positive, got sx=-0\.5"),
    (lambda: cam.rotation_error_deg(np.eye(3), np.eye(4)), r"\(3, 3\), \(4, 4\)"),
    (lambda: cam.align_umeyama(np.zeros((4, 3)), np.zeros((5, 3))), r"\(4, 3\), \(5, 3\)"),
    (lambda: cam.absolute_trajectory_error(np.stack([np.eye(4)] * 3), np.stack([np.eye(4)] * 2)),
     r"\(3, 4, 4\), \(2, 4, 4\)"),
    (lambda: cam.actions_from_poses(np.eye(4)), r"\(t, 4, 4\), got \(4, 4\)"),
    (lambda: cam.integrate_actions(_reflection(), []), r"c2w0 rotation is a reflection"),
    (lambda: cam.step_pose(cam.pose_from_heading(np.zeros(3), 0, 80.0), Action(pitch=15.0)),
     r"pitch .* got 9[45]\.\d*"),  # 80 + 15 in float
])
def test_bad_geometry_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("kwargs, match", [
    ({"forward": 2.5}, r"\|forward\| <= 2\.0, got 2\.5"),
    ({"right": -3.0}, r"\|right\| <= 2\.0, got -3\.0"),
    ({"yaw": 91.0}, r"\|yaw\| <= 90\.0, got 91\.0"),
    ({"pitch": float("nan")}, r"Action\.pitch must be finite.*got nan"),
    ({"yaw": float("inf")}, r"Action\.yaw must be finite.*got inf"),
    ({"forward": True}, r"Action\.forward must be a number, got True"),
    ({"forward": "1"}, r"Action\.forward must be a number, got '1'"),
    ({"buttons": {"fly"}}, r"unknown button 'fly'"),
    ({"buttons": "attack"}, r"the string 'attack'"),
    ({"buttons": None}, r"Action\.buttons must be a collection of names, got None"),
])
def test_bad_actions_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Action(**kwargs)


@pytest.mark.parametrize("call, match", [
    (lambda: Action.from_vector(np.zeros(5)), r"shape \(7,\).*got \(5,\)"),
    (lambda: Action.from_dict({"forwards": 1.0}), r"unknown action field 'forwards'"),
    (lambda: Action.from_dict([1.0]), r"must be a dict, got \[1\.0\]"),
    (lambda: Action.from_dict({"buttons": "attack"}), r"the string 'attack'"),
    (lambda: Action.from_dict({"buttons": ["use", "dance"]}), r"unknown button 'dance'"),
    (lambda: cam.turn_around(0), r"steps must be a positive integer, got 0"),
    (lambda: cam.orbit(2.0, 0), r"steps must be a positive integer, got 0"),
    (lambda: cam.straight(-1), r"steps must be a positive integer, got -1"),
    (lambda: cam.asymmetric_return(4, turn_steps=0), r"turn_steps .* got 0"),
    (lambda: cam.orbit(50.0, 4), r"\|forward\| <= 2\.0, got -50\.0"),  # a 70 m teleport
])
def test_bad_action_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
