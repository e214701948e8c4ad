"""Warps, reprojection error and the point cache on synthetic RGB-D frames."""

import numpy as np
import pytest

from worldlab import camera
from worldlab.engines.base import Observation
from worldlab.memory.cache3d import (PointCache, backward_warp, reprojection_error,
                                     splat_points, view_warp, warp_frame)

H = W = 32
K = camera.intrinsics_from_fov(W, H, 90.0)


def _frame(seed=0, plane_depth=None):
    """A random-colour frame over a smooth depth surface (or a fronto-parallel plane)."""
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    if plane_depth is not None:
        return rgb, np.full((H, W), plane_depth, np.float32)
    v, u = np.mgrid[0:H, 0:W]
    depth = (3.0 + 0.5 * np.sin(u / 5.0) + 0.02 * v).astype(np.float32)
    depth[:3, :5] = np.inf  # sky: nothing hit
    return rgb, depth


POSE = camera.pose_from_heading(np.array([1.0, -2.0, 1.5]), 30.0, 5.0)


def test_warp_into_own_pose_is_identity():
    rgb, depth = _frame()
    out, d, mask = warp_frame(rgb, depth, POSE, POSE, K)
    valid = np.isfinite(depth)
    np.testing.assert_array_equal(mask, valid)
    np.testing.assert_array_equal(out[valid], rgb[valid])
    np.testing.assert_allclose(d[valid], depth[valid], rtol=1e-5)
    assert np.isinf(d[~valid]).all()


def test_forward_warp_of_plane_shifts_by_parallax():
    # a plane 2 m ahead seen from a camera moved 0.25 m right: fx * 0.25 / 2 = 2 pixels left
    rgb, depth = _frame(1, plane_depth=2.0)
    dst = camera.step_pose(POSE, camera.Action(right=0.25))
    shift = K[0, 0] * 0.25 / 2.0
    assert shift == pytest.approx(2.0)
    out, d, mask = warp_frame(rgb, depth, POSE, dst, K)
    np.testing.assert_array_equal(out[:, :W - 2], rgb[:, 2:])
    assert mask[:, :W - 2].all() and not mask[:, W - 2:].any()
    np.testing.assert_allclose(d[mask], 2.0, rtol=1e-6)


def test_backward_warp_matches_forward_warp_and_detects_occlusion():
    rgb, depth = _frame(2, plane_depth=2.0)
    dst = camera.step_pose(POSE, camera.Action(right=0.25))
    fwd, dst_depth, fmask = warp_frame(rgb, depth, POSE, dst, K)
    back, bmask = backward_warp(rgb, np.full((H, W), 2.0, np.float32), POSE, dst, K,
                                src_depth=depth)
    both = fmask & bmask
    assert both.mean() > 0.8
    np.testing.assert_array_equal(back[both], fwd[both])
    # an occluder 1 m ahead in the source hides the plane: those pixels become invalid
    occluded = depth.copy()
    occluded[10:20, 10:20] = 1.0
    _, omask = backward_warp(rgb, np.full((H, W), 2.0, np.float32), POSE, dst, K,
                             src_depth=occluded)
    assert omask.sum() == bmask.sum() - 100
    _, bil = backward_warp(rgb, np.full((H, W), 2.0, np.float32), POSE, dst, K,
                           interp="bilinear")
    np.testing.assert_array_equal(bil, bmask | bil)  # same coverage without src_depth


def test_view_warp_draws_a_nearer_surface_whole_and_leaves_the_unseen_empty():
    """Into its own camera the view comes back exactly (nearest sampling). Stepping about
    0.5 m towards a plane 2 m ahead magnifies it 4/3: forward splatting leaves gaps between its
    points (a quarter of the frame), the view warp none, and every pixel it draws is the
    backward warp at the plane's true depth. Sideways past an occluder, the plane behind
    it that the view never saw stays empty. NaN depth, a pose that is not one and an
    unknown sampling are refused, naming them."""
    rgb, depth = _frame(6)
    out, d, mask = view_warp(rgb, depth, POSE, POSE, K)
    valid = np.isfinite(depth)
    np.testing.assert_array_equal(mask, valid)
    np.testing.assert_array_equal(out[valid], rgb[valid])
    np.testing.assert_allclose(d[valid], depth[valid], rtol=1e-5)
    rgb, plane = _frame(7, plane_depth=2.0)
    near = camera.step_pose(POSE, camera.Action(forward=0.5))
    _, _, splatted = warp_frame(rgb, plane, POSE, near, K)
    out, d, mask = view_warp(rgb, plane, POSE, near, K)
    assert splatted.mean() < 0.8 and mask.all()
    z = float(d[0, 0])  # the plane's depth from the nearer camera
    assert z == pytest.approx(1.5, rel=0.01)
    np.testing.assert_allclose(d, z, rtol=1e-5)
    back, _ = backward_warp(rgb, d, POSE, near, K)
    np.testing.assert_array_equal(out, back)
    blocked = plane.copy()
    blocked[:, 12:20] = 1.0  # a pillar 1 m ahead
    side = camera.step_pose(POSE, camera.Action(right=0.25))
    _, d, mask = view_warp(rgb, blocked, POSE, side, K)
    assert 0 < (~mask).sum() and np.isinf(d[~mask]).all()
    with pytest.raises(ValueError, match="interp"):
        view_warp(rgb, plane, POSE, near, K, interp="cubic")
    bad = plane.copy()
    bad[4, 4] = np.nan
    with pytest.raises(ValueError, match="src_depth contains NaN"):
        view_warp(rgb, bad, POSE, near, K)
    with pytest.raises(ValueError, match="dst_c2w rotation is not orthonormal"):
        view_warp(rgb, plane, POSE, near * np.array([2.0, 1, 1, 1])[:, None], K)


def test_reprojection_error_is_zero_for_consistent_views_and_large_otherwise():
    rgb, depth = _frame(3, plane_depth=2.0)
    dst = camera.step_pose(POSE, camera.Action(right=0.25))
    moved, dmoved, _ = warp_frame(rgb, depth, POSE, dst, K)
    obs_i = Observation(rgb, depth, POSE, K)
    obs_j = Observation(moved, np.full((H, W), 2.0, np.float32), dst, K)
    r = reprojection_error(obs_i, obs_j)
    assert r["median"] == 0.0 and r["covisible"] == pytest.approx((W - 2) / W)
    wrong = Observation(rgb, depth, dst, K)  # same image claimed at another pose
    assert reprojection_error(obs_i, wrong)["median"] > 30
    exclude = np.ones((H, W), bool)
    assert reprojection_error(obs_i, obs_j, exclude=exclude)["covisible"] == 0.0


def test_fusing_the_same_frame_twice_conserves_the_cache():
    rgb, depth = _frame(4)
    cache = PointCache(voxel=0.05)
    added = cache.fuse(rgb, depth, POSE, K)
    pts, cols = cache.points.copy(), cache.colors.copy()
    assert added == len(cache) > 0 and len(cache) <= np.isfinite(depth).sum()
    assert cache.fuse(rgb, depth, POSE, K) == 0
    np.testing.assert_array_equal(cache.points, pts)
    np.testing.assert_array_equal(cache.colors, cols)
    # a masked fuse adds nothing new either; a new colour replaces the old (last wins)
    cache.fuse(255 - rgb, depth, POSE, K, mask=np.isfinite(depth))
    assert len(cache) == len(pts)
    np.testing.assert_array_equal(cache.colors, 255 - cols)


def test_round_trip_render_reproduces_the_fused_frame():
    rgb, depth = _frame(5)
    cache = PointCache(voxel=0.02)
    cache.fuse(rgb, depth, POSE, K)
    out, d, mask = cache.render(POSE, K, H, W)
    assert mask.mean() > 0.8
    np.testing.assert_array_equal(out[mask], rgb[mask])
    np.testing.assert_allclose(d[mask], depth[mask], rtol=1e-5)
    # wider splats cover more without changing the pixels a point falls in
    _, _, mask3 = cache.render(POSE, K, H, W, splat=3)
    assert mask3.sum() >= mask.sum()
    # several footprints from one projection: the same renders as one at a time
    many = cache.render_splats(POSE, K, H, W, (1, 3))
    for splat, render in many.items():
        for got, want in zip(render, cache.render(POSE, K, H, W, splat=splat)):
            np.testing.assert_array_equal(got, want)


def _zbuffer_by_hand(points, colors, c2w, K, h, w, splat):
    """The z-buffer one point at a time: each pixel keeps the nearest point, the first such
    point on a tie."""
    rgb, depth = np.zeros((h, w, 3), np.uint8), np.full((h, w), np.inf)
    uv, z = camera.project(points, K, c2w)
    for (u, v), zi, c in zip(uv, z, colors):
        if zi <= 1e-6:
            continue
        c0, r0 = int(np.floor(u - (splat - 1) / 2)), int(np.floor(v - (splat - 1) / 2))
        for r in range(max(r0, 0), min(r0 + splat, h)):
            for col in range(max(c0, 0), min(c0 + splat, w)):
                if zi < depth[r, col]:
                    depth[r, col], rgb[r, col] = zi, c
    return rgb, depth.astype(np.float32), np.isfinite(depth)


@pytest.mark.parametrize("splat", [1, 2, 3])
def test_splat_z_buffer_matches_one_point_at_a_time(splat):
    rng = np.random.default_rng(splat)
    points = rng.normal(size=(400, 3)) * [2.0, 2.0, 1.0] + [0.0, 0.0, 2.5]
    points[:150] = np.round(points[:150], 1)  # repeated points: exact depth ties
    points[150:160, 2] = -1.0  # behind the camera
    colors = rng.integers(0, 256, (400, 3), dtype=np.uint8)
    got = splat_points(points, colors, np.eye(4), K, H, W, splat)
    for a, b in zip(got, _zbuffer_by_hand(points, colors, np.eye(4), K, H, W, splat)):
        np.testing.assert_array_equal(a, b)


def _soft_by_hand(points, colors, c2w, K, h, w, splat, blend):
    """The soft z-buffer one pixel at a time: the mean colour of the points covering it
    whose depth is within (1 + blend) times the nearest of them."""
    uv, z = camera.project(points, K, c2w)
    near = splat_points(points, colors, c2w, K, h, w, splat)[1]
    sums, count = np.zeros((h, w, 3)), np.zeros((h, w))
    for (u, v), zi, c in zip(uv, z, colors):
        c0, r0 = int(np.floor(u - (splat - 1) / 2)), int(np.floor(v - (splat - 1) / 2))
        for r in range(max(r0, 0), min(r0 + splat, h)):
            for col in range(max(c0, 0), min(c0 + splat, w)):
                if 1e-6 < zi <= near[r, col] * (1 + blend):
                    sums[r, col] += c
                    count[r, col] += 1
    return np.clip(np.rint(sums / np.maximum(count, 1)[..., None]), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("splat, blend", [(1, 0.2), (2, 1.0), (3, 1e9)])
def test_soft_z_buffer_averages_the_points_near_the_nearest(splat, blend):
    """`blend`: a pixel's colour is the mean of the points within (1 + blend) times its
    nearest depth; depth and coverage are the hard z-buffer's; bad blends are refused."""
    rng = np.random.default_rng(splat)
    cache = PointCache(voxel=0.01)
    cache.points = rng.normal(size=(400, 3)) * [2.0, 2.0, 1.0] + [0.0, 0.0, 2.5]
    cache.colors = rng.integers(0, 256, (400, 3), dtype=np.uint8)
    hard = cache.render_splats(np.eye(4), K, H, W, (splat,))[splat]
    soft = cache.render_splats(np.eye(4), K, H, W, (splat,), blend)[splat]
    np.testing.assert_array_equal(soft[1], hard[1])
    np.testing.assert_array_equal(soft[2], hard[2])
    want = _soft_by_hand(cache.points, cache.colors, np.eye(4), K, H, W, splat, blend)
    np.testing.assert_array_equal(soft[0][soft[2]], want[soft[2]])
    assert (soft[0] != hard[0]).any()  # some pixels do average several points
    for bad in (-0.1, float("nan"), True, "1"):
        with pytest.raises(ValueError, match="blend"):
            cache.render_splats(np.eye(4), K, H, W, (1,), bad)


def test_bounded_cache_keeps_the_points_seen_last():
    left = camera.pose_from_heading(np.zeros(3), 0.0, 0.0)
    right = camera.pose_from_heading(np.zeros(3), 180.0, 0.0)  # sees other voxels
    rgb, depth = _frame(8, plane_depth=2.0)
    alone = PointCache(voxel=0.02)
    alone.fuse(rgb, depth, left, K)
    cache = PointCache(voxel=0.02, max_points=len(alone))
    assert cache.fuse(rgb, depth, left, K) == len(alone)
    assert cache.fuse(rgb, depth, right, K) == len(alone)  # new voxels, counted as added
    assert len(cache) == len(alone)  # ... but the left view's went: seen longer ago
    assert not cache.render(left, K, H, W)[2].any() and cache.render(right, K, H, W)[2].any()
    before = cache.snapshot()
    cache.fuse(rgb, depth, left, K)  # seen again: now the right view's are the oldest
    np.testing.assert_array_equal(cache.render(left, K, H, W)[0], alone.render(left, K, H, W)[0])
    cache.restore(before)  # takes the last fuse back
    assert not cache.render(left, K, H, W)[2].any()
    cache.fuse(rgb, depth, left, K)
    np.testing.assert_array_equal(cache.points, alone.points)


def _fuse_by_concatenation(cache, points, colors, seen, max_points):
    """The cache's merge written plainly: old points then new, the last of each voxel wins,
    then the points seen least recently go (ties at the bound: the last in key order)."""
    keys = np.concatenate([cache._keys, cache._pack(points)])
    stamps = np.concatenate([cache._seen, np.full(len(points), seen)])
    uniq, rev_first = np.unique(keys[::-1], return_index=True)
    last = len(keys) - 1 - rev_first
    if max_points is not None and len(last) > max_points:
        order = np.argsort(stamps[last], kind="stable")  # oldest first, key order within
        ties = stamps[last][order]
        cut = ties[len(last) - max_points - 1]
        older, equal = order[ties < cut], order[ties == cut]
        drop = np.concatenate([older, equal[len(equal) - (len(last) - max_points - len(older)):]])
        last = np.delete(last, drop)
    return (np.concatenate([cache.points, points])[last],
            np.concatenate([cache.colors, colors])[last])


@pytest.mark.parametrize("max_points", [None, 700, 2000])
def test_fuse_equals_the_plain_concatenate_and_unique(max_points):
    rng = np.random.default_rng(max_points or 0)
    cache = PointCache(voxel=0.05, max_points=max_points)
    for i in range(25):
        rgb, depth = _frame(i)
        depth = np.round(depth * rng.uniform(0.8, 1.2), 1)  # voxels repeated in a frame
        pose = camera.pose_from_heading(rng.normal(size=3) * 0.3, float(rng.uniform(0, 360)), 0.0)
        ok = np.isfinite(depth)
        pts = camera.unproject_depth(depth, K, pose)[ok]
        want = _fuse_by_concatenation(cache, pts, rgb[ok], cache._fuses + 1, max_points)
        cache.fuse(rgb, depth, pose, K)
        np.testing.assert_array_equal(cache.points, want[0])
        np.testing.assert_array_equal(cache.colors, want[1])


def test_empty_cache_renders_nothing():
    rgb, depth, mask = PointCache().render(POSE, K, 8, 6)
    assert rgb.shape == (8, 6, 3) and np.isinf(depth).all() and not mask.any()
    assert not PointCache().render_splats(POSE, K, 8, 6, (1, 2))[2][2].any()
    assert splat_points(np.zeros((0, 3)), np.zeros((0, 3), np.uint8), POSE, K, 4, 4)[2].sum() == 0


@pytest.mark.parametrize("call, name", [
    (lambda rgb, d: warp_frame(rgb[..., :2], d, POSE, POSE, K), "src_rgb"),
    (lambda rgb, d: warp_frame(rgb, d[:-1], POSE, POSE, K), "src_depth"),
    (lambda rgb, d: warp_frame(rgb, d, POSE[:3], POSE, K), "src_c2w"),
    (lambda rgb, d: warp_frame(rgb, d, POSE, POSE, K, splat=0), "splat"),
    (lambda rgb, d: backward_warp(rgb, d[None], POSE, POSE, K), "dst_depth"),
    (lambda rgb, d: backward_warp(rgb, d, POSE, POSE, K, interp="cubic"), "interp"),
    (lambda rgb, d: PointCache().fuse(rgb.astype(np.float32), d, POSE, K), "rgb"),
    (lambda rgb, d: PointCache().fuse(rgb, d, POSE, K, mask=np.ones((2, 2), bool)), "mask"),
    (lambda rgb, d: PointCache(voxel=-1.0), "voxel"),
    (lambda rgb, d: PointCache(max_points=0), "max_points"),
    (lambda rgb, d: PointCache().render(POSE, K, 0, 4), "h"),
])
def test_bad_input_raises_naming_the_value(call, name):
    rgb, depth = _frame(6)
    with pytest.raises(ValueError, match=name):
        call(rgb, depth)


def test_nan_depth_is_rejected_and_cache_left_unchanged():
    rgb, depth = _frame(7)
    cache = PointCache()
    cache.fuse(rgb, depth, POSE, K)
    n = len(cache)
    depth[0, 0] = np.nan
    with pytest.raises(ValueError, match="depth"):
        cache.fuse(rgb, depth, POSE, K)
    assert len(cache) == n
