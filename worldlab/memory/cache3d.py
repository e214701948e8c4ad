"""3D geometry of frames: forward/backward warps, reprojection error and a fused point cache.

Everything here is plain numpy in worldlab's conventions (`worldlab.camera`): poses are
camera-to-world with OpenCV camera axes, depth is metric z-depth with `inf` where nothing was
hit, pixel centres sit at integer + 0.5.

- `warp_frame`: forward warp (unproject every source pixel, move it to the target camera,
  z-buffer so the nearest point wins). Leaves holes where the target sees more than the source.
- `backward_warp`: pull colours for every target pixel whose depth is known; with the source
  depth it also detects pixels hidden from the source (occlusion).
- `view_warp`: both in turn: the source's depth splatted forward and its gaps filled, then
  its colours pulled back, so a surface seen closer than before has no holes.
- `reprojection_error`: how well two observations of an engine agree about the static world;
  the geometry test every engine must pass.
- `PointCache`: GEN3C-style memory: fuse RGB-D frames into voxel-deduplicated coloured points
  and splat-render them into any camera with a coverage mask.

Shape names: h w height width, n points.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from .. import camera

# ----------------------------------------------------------------------------------------
# Validation: errors name the bad value and what was expected
# ----------------------------------------------------------------------------------------


def check_rgb(name: str, rgb) -> np.ndarray:
    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"{name} must be uint8 (h, w, 3), got {rgb.dtype} {rgb.shape}")
    return rgb


def check_depth(name: str, depth, hw: tuple[int, int] | None = None) -> np.ndarray:
    depth = np.asarray(depth)
    if depth.ndim != 2 or not np.issubdtype(depth.dtype, np.floating):
        raise ValueError(f"{name} must be a float (h, w) map, got {depth.dtype} {depth.shape}")
    if hw is not None and depth.shape != hw:
        raise ValueError(f"{name} must have shape {hw} to match the image, got {depth.shape}")
    if np.isnan(depth).any():
        raise ValueError(f"{name} contains NaN; expected metric z-depth with inf for misses")
    return depth


def _check_mask(name: str, mask, hw: tuple[int, int]) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.shape != hw or mask.dtype != np.bool_:
        raise ValueError(f"{name} must be a bool {hw} mask, got {mask.dtype} {mask.shape}")
    return mask


def _check_size(h: int, w: int) -> None:
    for n, v in (("h", h), ("w", w)):
        if not (isinstance(v, (int, np.integer)) and v > 0):
            raise ValueError(f"{n} must be a positive integer, got {v!r}")


def _check_splat(splat) -> int:
    if not (isinstance(splat, (int, np.integer)) and 1 <= splat <= 15):
        raise ValueError(f"splat must be an integer footprint in [1, 15] pixels, got {splat!r}")
    return int(splat)


# ----------------------------------------------------------------------------------------
# Forward splatting with a z-buffer (shared by warp_frame and PointCache.render)
# ----------------------------------------------------------------------------------------


def splat_points(points: np.ndarray, colors: np.ndarray, c2w: np.ndarray, K: np.ndarray,
                 h: int, w: int, splat: int = 1):
    """Render coloured world points (n, 3) into a camera: the nearest point wins each pixel.

    `splat` is the square footprint side in pixels: 1 paints only the pixel a point falls
    in, s paints the s x s pixels whose centres are nearest to it (fills holes between
    sparse points at the cost of fattening edges).
    Returns rgb (h, w, 3) uint8, depth (h, w) float32 (inf where empty), mask (h, w) bool.
    """
    _check_size(h, w)
    splat = _check_splat(splat)
    if len(points) == 0:
        return _empty(h, w)
    return _splat_projected(*camera.project(points, K, c2w), colors, h, w, splat)


def _empty(h: int, w: int):
    return (np.zeros((h, w, 3), np.uint8), np.full((h, w), np.inf, np.float32),
            np.zeros((h, w), bool))


def _check_blend(blend) -> float:
    if isinstance(blend, bool) or not isinstance(blend, (int, float)) or not blend >= 0:
        raise ValueError(f"blend must be a share of depth >= 0, got {blend!r}")
    return float(blend)


def _splat_projected(uv: np.ndarray, z: np.ndarray, colors: np.ndarray, h: int, w: int,
                     splat: int, blend: float = 0.0):
    """`splat_points` from the points' pixels uv (n, 2) and depths z (n,) in the camera.

    `blend` > 0 is a soft z-buffer: a pixel's colour is the mean of the points whose depth
    is within (1 + blend) times its nearest, not the nearest point's alone; its depth is
    still the nearest. Points fused with noisy depth scatter in front of and behind their
    surface, and the nearest of them is the most wrong."""
    rgb, depth, _ = _empty(h, w)
    # the s x s block of pixels whose centres are nearest starts at floor(u - (s - 1) / 2);
    # keep the points in front whose block has a pixel in the image
    start = np.floor(uv - (splat - 1) / 2)
    keep = np.flatnonzero((z > 1e-6) & (start[:, 0] > -splat) & (start[:, 0] < w)
                          & (start[:, 1] > -splat) & (start[:, 1] < h))
    # a z-buffer padded by s - 1 pixels on every side holds every block whole, so the
    # blocks need no clipping; the image is its centre
    pad, wp = splat - 1, w + 2 * (splat - 1)
    corner = (start[keep, 1].astype(np.int64) + pad) * wp + start[keep, 0].astype(np.int64) + pad
    offs = (np.arange(splat)[:, None] * wp + np.arange(splat)).ravel()  # (s * s,)
    flat = corner[:, None] + offs  # (m, s * s): the pixels of each kept point's block
    zk = z[keep]
    # in O(n): the nearest depth of each pixel, then among the points at that depth the
    # first (the lowest point index, as a stable sort by (pixel, depth) would)
    near = np.full((h + 2 * pad) * wp, np.inf)
    zs = np.repeat(zk, splat * splat)  # (m * s * s,) the depth of each splatted pixel
    np.minimum.at(near, flat.ravel(), zs)
    win_pt, win_off = np.nonzero(near[flat] == zk[:, None])
    owner = np.full(len(near), len(keep), np.int64)
    np.minimum.at(owner, flat[win_pt, win_off], win_pt)
    owner = owner.reshape(h + 2 * pad, wp)[pad:pad + h, pad:pad + w]
    mask = owner < len(keep)
    if blend:
        mean = _blended(flat.ravel(), zs, near, np.repeat(colors[keep], splat * splat, axis=0),
                        blend)
        rgb[mask] = mean.reshape(h + 2 * pad, wp, 3)[pad:pad + h, pad:pad + w][mask]
    else:
        rgb[mask] = colors[keep[owner[mask]]]
    depth[mask] = near.reshape(h + 2 * pad, wp)[pad:pad + h, pad:pad + w][mask]
    return rgb, depth, mask


def _blended(pixel: np.ndarray, z: np.ndarray, near: np.ndarray, colors: np.ndarray,
             blend: float) -> np.ndarray:
    """uint8 (len(near), 3): per z-buffer pixel the mean colour of the splats (`pixel`,
    `z`, `colors` (m, 3), one row per point and pixel of its block) within (1 + blend)
    times its nearest depth `near`; 0 where none landed."""
    ok = z <= near[pixel] * (1 + blend)
    at, n = pixel[ok], len(near)
    count = np.maximum(np.bincount(at, minlength=n), 1)
    mean = [np.bincount(at, weights=colors[ok, c], minlength=n) / count for c in range(3)]
    return np.clip(np.rint(np.stack(mean, axis=1)), 0, 255).astype(np.uint8)


def _valid_points(depth: np.ndarray, K: np.ndarray, c2w: np.ndarray, keep=None):
    """World points (n, 3) of pixels with finite positive depth, and their (n,) flat indices."""
    ok = np.isfinite(depth) & (depth > 0)
    if keep is not None:
        ok &= keep
    idx = np.flatnonzero(ok)
    h, w = depth.shape
    uv = camera.pixel_grid(h, w).reshape(-1, 2)[idx]
    return camera.unproject(uv, depth.reshape(-1)[idx], K, c2w), idx


# ----------------------------------------------------------------------------------------
# Warps
# ----------------------------------------------------------------------------------------


def warp_frame(src_rgb, src_depth, src_c2w, dst_c2w, K, dst_K=None, splat: int = 1):
    """Forward-warp a source RGB-D frame into the target camera (same image size).

    Returns rgb (h, w, 3) uint8, depth (h, w) float32 z-depth in the target (inf where no
    source point landed) and the coverage mask (h, w) bool.
    """
    src_rgb = check_rgb("src_rgb", src_rgb)
    h, w = src_rgb.shape[:2]
    src_depth = check_depth("src_depth", src_depth, (h, w))
    K = camera.check_K(K)
    dst_K = K if dst_K is None else camera.check_K(dst_K, "dst_K")
    points, idx = _valid_points(src_depth, K, camera.check_c2w(src_c2w, "src_c2w"))
    return splat_points(points, src_rgb.reshape(-1, 3)[idx],
                        camera.check_c2w(dst_c2w, "dst_c2w"), dst_K, h, w, splat)


def backward_warp(src_rgb, dst_depth, src_c2w, dst_c2w, K, src_depth=None,
                  occlusion_tol: float = 0.05, src_K=None, interp: str = "nearest"):
    """Pull source colours into the target camera using the target's own depth.

    Every target pixel with finite depth is unprojected, projected into the source camera
    (`src_K`, default `K`) and sampled there (`interp` "nearest" or "bilinear"). With
    `src_depth`, a pixel whose source depth disagrees with its distance to the source camera
    by more than `occlusion_tol` (relative) is hidden from the source and marked invalid.
    Returns rgb (h, w, 3) uint8 and the valid mask (h, w) bool.
    """
    src_rgb = check_rgb("src_rgb", src_rgb)
    hs, ws = src_rgb.shape[:2]
    dst_depth = check_depth("dst_depth", dst_depth)
    if interp not in ("nearest", "bilinear"):
        raise ValueError(f"interp must be 'nearest' or 'bilinear', got {interp!r}")
    if not (np.isfinite(occlusion_tol) and occlusion_tol > 0):
        raise ValueError(f"occlusion_tol must be a positive relative tolerance, "
                         f"got {occlusion_tol!r}")
    K = camera.check_K(K)
    src_K = K if src_K is None else camera.check_K(src_K, "src_K")
    h, w = dst_depth.shape
    points, idx = _valid_points(dst_depth, K, camera.check_c2w(dst_c2w, "dst_c2w"))
    uv, z = camera.project(points, src_K, camera.check_c2w(src_c2w, "src_c2w"))  # (n, 2), (n,)
    col, row = np.floor(uv[:, 0]).astype(np.int64), np.floor(uv[:, 1]).astype(np.int64)
    ok = (z > 1e-6) & (col >= 0) & (col < ws) & (row >= 0) & (row < hs)
    if src_depth is not None:
        src_depth = check_depth("src_depth", src_depth, (hs, ws))
        d = src_depth[row.clip(0, hs - 1), col.clip(0, ws - 1)]
        with np.errstate(invalid="ignore"):
            ok &= np.abs(d - z) <= occlusion_tol * z
    idx, uv, col, row = idx[ok], uv[ok], col[ok], row[ok]
    out = np.zeros((h * w, 3), np.uint8)
    out[idx] = (src_rgb[row, col] if interp == "nearest"
                else _bilinear(src_rgb, uv))
    mask = np.zeros(h * w, bool)
    mask[idx] = True
    return out.reshape(h, w, 3), mask.reshape(h, w)


def view_warp(rgb, depth, src_c2w, dst_c2w, K, occlusion_tol: float = 0.05,
              interp: str = "nearest"):
    """One RGB-D view moved into the target camera without splatting's gaps: its depth is
    forward-splatted there, each gap takes the nearest landed depth, and every target pixel
    pulls its colour back from the view (`backward_warp`, with the occlusion test, so a
    surface the view did not see stays empty). A surface seen closer than before is drawn
    whole, not as scattered points over the last frame's colour.
    Returns rgb (h, w, 3) uint8, depth (h, w) float32 (inf where empty) and the mask."""
    rgb = check_rgb("rgb", rgb)
    _, landed_depth, landed = warp_frame(rgb, depth, src_c2w, dst_c2w, K)
    if not landed.any():
        return _empty(*landed.shape)
    _, (row, col) = ndimage.distance_transform_edt(~landed, return_indices=True)
    target = landed_depth[row, col]  # (h, w) every pixel: its own or the nearest landed depth
    out, mask = backward_warp(rgb, target, src_c2w, dst_c2w, K, src_depth=depth,
                              occlusion_tol=occlusion_tol, interp=interp)
    return out, np.where(mask, target, np.inf).astype(np.float32), mask


def _bilinear(img: np.ndarray, uv: np.ndarray) -> np.ndarray:
    """Sample img (h, w, 3) at pixel positions uv (n, 2) with edge clamping -> (n, 3) uint8."""
    h, w = img.shape[:2]
    x, y = uv[:, 0] - 0.5, uv[:, 1] - 0.5  # to index space: pixel centres at integers
    x0, y0 = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
    fx, fy = (x - x0)[:, None], (y - y0)[:, None]
    xa, xb = x0.clip(0, w - 1), (x0 + 1).clip(0, w - 1)
    ya, yb = y0.clip(0, h - 1), (y0 + 1).clip(0, h - 1)
    f = img.astype(np.float64)
    top = f[ya, xa] * (1 - fx) + f[ya, xb] * fx
    bot = f[yb, xa] * (1 - fx) + f[yb, xb] * fx
    return np.round(top * (1 - fy) + bot * fy).clip(0, 255).astype(np.uint8)


def reprojection_error(obs_i, obs_j, exclude=None, occlusion_tol: float = 0.05) -> dict:
    """Colour disagreement between observation i and observation j warped into i.

    Per pixel: mean over channels of |rgb_i - warp(rgb_j)| in 0-255 units, over pixels
    co-visible in both (finite depth in i, inside j and not occluded there) and not in
    `exclude` (h, w) bool, e.g. characters. Returns median, p90 and `covisible`, the
    fraction of frame i's pixels that were compared (median/p90 are nan when none were).
    """
    h, w = obs_i.depth.shape
    warped, mask = backward_warp(obs_j.rgb, obs_i.depth, obs_j.c2w, obs_i.c2w, obs_i.K,
                                 src_depth=obs_j.depth, occlusion_tol=occlusion_tol,
                                 src_K=obs_j.K)
    if exclude is not None:
        mask &= ~_check_mask("exclude", exclude, (h, w))
    err = np.abs(obs_i.rgb.astype(np.int16) - warped.astype(np.int16)).mean(-1)[mask]  # (n,)
    if err.size == 0:
        return {"median": float("nan"), "p90": float("nan"), "covisible": 0.0}
    return {"median": float(np.median(err)), "p90": float(np.percentile(err, 90)),
            "covisible": float(mask.mean())}


# ----------------------------------------------------------------------------------------
# The point cache
# ----------------------------------------------------------------------------------------

_KEY_BITS = 21  # per axis: +-2^20 voxels (+-52 km at 5 cm) packed into one int64
_KEY_HALF = 1 << (_KEY_BITS - 1)


def _least_recent(seen: np.ndarray, n: int) -> np.ndarray:
    """A mask of the n entries with the oldest `seen` stamps (among equal stamps at the
    boundary, the last ones), in O(len(seen))."""
    v = np.partition(seen, n - 1)[n - 1]  # the n-th oldest stamp
    drop = seen < v
    ties = np.flatnonzero(seen == v)
    drop[ties[len(ties) - (n - int(drop.sum())):]] = True
    return drop


class PointCache:
    """Coloured 3D points fused from RGB-D frames, one point per `voxel`-metre cell.

    A new observation of an occupied voxel replaces the old point and colour (last wins),
    so fusing the same frame twice leaves the cache unchanged (conservation) and the cache
    follows a world that changes. `render` splats the points into any camera.

    `max_points` bounds the cache (and so the cost of every fuse and render, however long
    a walk runs): past it, the points observed least recently are dropped first. None keeps
    every point.
    """

    def __init__(self, voxel: float = 0.05, max_points: int | None = None):
        if not (isinstance(voxel, (int, float)) and np.isfinite(voxel) and voxel > 0):
            raise ValueError(f"voxel must be a positive size in metres, got {voxel!r}")
        if max_points is not None and not (isinstance(max_points, (int, np.integer))
                                           and max_points > 0):
            raise ValueError(f"max_points must be a positive number of points or None, "
                             f"got {max_points!r}")
        self.voxel, self.max_points = float(voxel), max_points
        self.points = np.zeros((0, 3), np.float64)  # (n, 3) world metres
        self.colors = np.zeros((0, 3), np.uint8)  # (n, 3)
        self._keys = np.zeros(0, np.int64)  # (n,) packed voxel index, sorted
        self._seen = np.zeros(0, np.int64)  # (n,) the fuse that last observed each point
        self._fuses = 0

    def __len__(self) -> int:
        return len(self.points)

    def _pack(self, points: np.ndarray) -> np.ndarray:
        cell = np.floor(points / self.voxel).astype(np.int64) + _KEY_HALF  # (n, 3)
        if cell.size and (cell.min() < 0 or cell.max() >= 2 * _KEY_HALF):
            far = np.abs(points).max()
            raise ValueError(f"points up to {far:.3g} m away exceed the cache's range of "
                             f"{_KEY_HALF * self.voxel:.3g} m at voxel {self.voxel} m")
        return (cell[:, 0] << (2 * _KEY_BITS)) | (cell[:, 1] << _KEY_BITS) | cell[:, 2]

    def fuse(self, rgb, depth, c2w, K, mask=None) -> int:
        """Add the pixels of an RGB-D frame with finite depth (and `mask`, if given).

        Returns the number of points added (new voxels, counted before any are dropped for
        `max_points`); refreshed voxels are not counted.
        """
        rgb = check_rgb("rgb", rgb)
        hw = rgb.shape[:2]
        depth = check_depth("depth", depth, hw)
        keep = None if mask is None else _check_mask("mask", mask, hw)
        points, idx = _valid_points(depth, camera.check_K(K), camera.check_c2w(c2w), keep)
        keys = self._pack(points)
        # the last pixel of each voxel wins within the frame, as the frame wins over the cache
        new_keys, rev_first = np.unique(keys[::-1], return_index=True)
        src = len(keys) - 1 - rev_first  # (m,) the winning point of each new key, key order
        at = np.searchsorted(self._keys, new_keys)
        hit = at < len(self._keys)
        hit[hit] = self._keys[at[hit]] == new_keys[hit]
        self._fuses += 1
        # one gather over the cache, O(n + m log m): new voxels go where their keys keep the
        # order, voxels seen again take the new point; every array is new (snapshots hold
        # the old ones). take(), not boolean rows: ~5x faster on (n, 3) arrays
        n, miss = len(self), ~hit
        added = int(miss.sum())
        fresh = np.zeros(n + added, bool)  # the merged slots of the new voxels
        fresh[at[miss] + np.arange(added)] = True
        order = np.empty(n + added, np.int64)  # merged slot -> row of [cache; new voxels]
        order[~fresh], order[fresh] = np.arange(n), n + np.arange(added)
        merged = []
        for old, new in ((self._keys, new_keys), (self.points, points[src]),
                         (self.colors, rgb.reshape(-1, 3)[idx[src]]),
                         (self._seen, np.full(len(src), self._fuses))):
            rows = np.concatenate([old, new.compress(miss, axis=0)])
            rows[at[hit]] = new.compress(hit, axis=0)
            merged.append(rows)
        if self.max_points is not None and len(order) > self.max_points:
            # the most recently observed max_points, still in key order
            order = order.compress(~_least_recent(merged[3].take(order),
                                                  len(order) - self.max_points))
        keys, pts, cols, seen = (rows.take(order, axis=0) for rows in merged)
        self._keys, self.points, self.colors, self._seen = keys, pts, cols, seen
        return added

    def snapshot(self) -> tuple:
        """What `restore` needs to take back every fuse after it (arrays are replaced by a
        fuse, never written in place, so this is cheap)."""
        return self.points, self.colors, self._keys, self._seen, self._fuses

    def restore(self, snapshot: tuple) -> None:
        self.points, self.colors, self._keys, self._seen, self._fuses = snapshot

    def render(self, c2w, K, h: int, w: int, splat: int = 1):
        """Splat the cache into a camera: rgb (h, w, 3) uint8, depth (h, w) float32, mask."""
        return splat_points(self.points, self.colors, camera.check_c2w(c2w),
                            camera.check_K(K), h, w, splat)

    def render_splats(self, c2w, K, h: int, w: int, splats: tuple[int, ...],
                      blend: float = 0.0) -> dict:
        """{splat: render} for each footprint of `splats`, the points projected once: the
        same renders as `render` at each (with `blend`, a soft z-buffer: `_splat_projected`)."""
        _check_size(h, w)
        splats = tuple(_check_splat(s) for s in splats)
        blend = _check_blend(blend)
        if len(self.points) == 0:
            return {s: _empty(h, w) for s in splats}
        uv, z = camera.project(self.points, camera.check_K(K), camera.check_c2w(c2w))
        return {s: _splat_projected(uv, z, self.colors, h, w, s, blend) for s in splats}
