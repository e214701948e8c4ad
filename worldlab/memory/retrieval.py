"""Retrieved memory: past chunks chosen by how much of their view the next chunk shares.

WorldPlay's "reconstituted context memory": besides the recent chunks in the KV window, the
world model is shown the past chunks whose camera view overlaps the chunk it is about to
generate most. Overlap is computed from poses (and depth when known), not recency, so a
room seen minutes ago comes back when the player turns to face it again.

- `fov_overlap`: the share of points a source camera sees (on its depth map, or spread
  through its frustum between `near` and `far`) that a destination camera also sees.
- `chunk_overlap`: how much of a target chunk's view each past chunk shows.
- `select_memory`: THE selection rule (sink first, then the best-overlapping older chunks),
  the same function at training time and at play time; `memory_slots`: THE padding rule
  that fills the model's fixed number of slots, also shared.
- `ChunkBank`: the play-time store of one rollout's past chunks (latents, poses, depth).

Plain numpy in worldlab's conventions (`worldlab.camera`): poses are camera-to-world with
OpenCV camera axes, depth is metric z-depth with `inf` where nothing was hit, pixel
centres at integer + 0.5. Shape names: n sources or chunks, f frames of a chunk, h w
height width, m sample points, c channels.
"""

from __future__ import annotations

import numpy as np

from .. import camera

# ----------------------------------------------------------------------------------------
# Validation: errors name the bad value and what was expected
# ----------------------------------------------------------------------------------------


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _check_hw(hw) -> tuple[int, int]:
    if not (isinstance(hw, (tuple, list)) and len(hw) == 2):
        raise ValueError(f"hw must be the image size (h, w), got {hw!r}")
    return _check_int("hw[0] (height)", hw[0], 1), _check_int("hw[1] (width)", hw[1], 1)


def _check_range(near, far) -> None:
    for name, v in (("near", near), ("far", far)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise ValueError(f"{name} must be a number of metres, got {v!r}")
    if not (np.isfinite(near) and np.isfinite(far) and 0 < near < far):
        raise ValueError(f"near and far must be finite with 0 < near < far, got near={near!r}, "
                         f"far={far!r}")


def _check_depth(name: str, depth, shape: tuple) -> np.ndarray:
    depth = np.asarray(depth)
    if depth.shape != shape or not np.issubdtype(depth.dtype, np.floating):
        raise ValueError(f"{name} must be a float array of shape {shape}, got {depth.dtype} "
                         f"{depth.shape}")
    if np.isnan(depth).any():
        raise ValueError(f"{name} contains NaN; expected metric z-depth with inf for misses")
    return depth.astype(np.float64)


def _check_chunks(name: str, c2w, ndim: int) -> np.ndarray:
    """Poses of shape (n, f, 4, 4) (ndim 4) or (f, 4, 4) (ndim 3), finite and rigid."""
    c2w = camera.check_c2w(c2w, name)
    if c2w.ndim != ndim or c2w.shape[-3] < 1:
        want = "(n, f, 4, 4)" if ndim == 4 else "(f, 4, 4)"
        raise ValueError(f"{name} must have shape {want} with f >= 1, got {c2w.shape}")
    return c2w


# ----------------------------------------------------------------------------------------
# Field-of-view overlap of cameras
# ----------------------------------------------------------------------------------------


def _sample_pixels(h: int, w: int, grid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows (grid,), cols (grid,), uv (grid * grid, 2)): the pixel nearest the centre of
    each cell of a grid x grid split of the image, and its pixel-centre coordinates."""
    if grid > min(h, w):
        raise ValueError(f"grid must be at most min(h, w) = {min(h, w)} samples per side, "
                         f"got {grid}")
    rows = ((np.arange(grid) + 0.5) * h / grid).astype(np.int64)
    cols = ((np.arange(grid) + 0.5) * w / grid).astype(np.int64)
    uv = camera.pixel_grid(h, w)[rows][:, cols].reshape(-1, 2)
    return rows, cols, uv


def _to_world(c2w: np.ndarray, cam: np.ndarray) -> np.ndarray:
    """Camera-frame points (n, m, 3) of cameras c2w (n, 4, 4) -> world points (n, m, 3)
    (a batched matmul: einsum's generic loop is ~30x slower here)."""
    return cam @ c2w[:, :3, :3].transpose(0, 2, 1) + c2w[:, None, :3, 3]


def _seen_share(points: np.ndarray, valid: np.ndarray, dst_c2w: np.ndarray, K: np.ndarray,
                h: int, w: int) -> np.ndarray:
    """Share (n,) of the valid points (n, m, 3) (mask (n, m)) inside camera dst's image,
    in front of it; 0 where a source has no valid point."""
    uv, z = camera.project(points, K, dst_c2w)  # (n, m, 2), (n, m)
    with np.errstate(invalid="ignore"):  # uv of points at z = 0 is NaN: compares False
        inside = (z > 0) & (uv[..., 0] >= 0) & (uv[..., 0] < w) \
            & (uv[..., 1] >= 0) & (uv[..., 1] < h)
    count, total = (inside & valid).sum(-1), valid.sum(-1)
    return np.where(total > 0, count / np.maximum(total, 1), 0.0)


def fov_overlap(src_c2w, dst_c2w, K, hw, src_depth=None, near: float = 0.5,
                far: float = 8.0, grid: int = 8, depths: int = 6):
    """The share of what camera(s) `src_c2w` see that camera `dst_c2w` also sees.

    src_c2w (4, 4) or (n, 4, 4); dst_c2w (4, 4); K (3, 3) intrinsics of an image hw =
    (h, w) shared by both. Points are sampled at a grid x grid subsample of the source's
    pixel centres: with `src_depth` ((h, w), or (n, h, w) for n sources) one point per
    pixel at its depth (pixels with inf or non-positive depth are ignored, and a source
    with no valid pixel has overlap 0); without it, `depths` points per pixel at z-depths
    evenly spaced in [near, far] (the frustum volume, from poses alone). A point counts
    when it is in front of the destination (z > 0) and inside its image.
    Returns a float for one source, (n,) float64 for n.
    """
    src = camera.check_c2w(src_c2w, "src_c2w")
    dst = camera.check_c2w(dst_c2w, "dst_c2w")
    if src.ndim not in (2, 3) or dst.ndim != 2:
        raise ValueError(f"src_c2w must be (4, 4) or (n, 4, 4) and dst_c2w (4, 4), got "
                         f"{src.shape} and {dst.shape}")
    K, (h, w) = camera.check_K(K), _check_hw(hw)
    grid, depths = _check_int("grid", grid, 1), _check_int("depths", depths, 1)
    _check_range(near, far)
    single, src = src.ndim == 2, src.reshape(-1, 4, 4)  # (n, 4, 4)
    points, valid = _frustum_points(src, K, h, w, src_depth, single, near, far, grid, depths)
    share = _seen_share(points, valid, dst, K, h, w)
    return float(share[0]) if single else share


def _frustum_points(src, K, h, w, src_depth, single, near, far, grid, depths):
    """World points (n, m, 3) sampled in the views of cameras src (n, 4, 4) and their
    valid mask (n, m), as `fov_overlap` describes."""
    rows, cols, uv = _sample_pixels(h, w, grid)
    rays = camera.unproject(uv, np.ones(len(uv)), K, np.eye(4))  # (m, 3) at z-depth 1
    if src_depth is None:
        z = np.linspace(near, far, depths)  # (depths,)
        cam = (z[:, None, None] * rays).reshape(1, -1, 3).repeat(len(src), 0)  # (n, m, 3)
        valid = np.ones(cam.shape[:2], bool)
    else:
        shape = (h, w) if single else (len(src), h, w)
        d = _check_depth("src_depth", src_depth, shape).reshape(-1, h, w)[:, rows][:, :, cols]
        d = d.reshape(len(src), -1)  # (n, m)
        valid = np.isfinite(d) & (d > 0)
        cam = np.where(valid, d, 1.0)[..., None] * rays  # invalid points are masked out
    return _to_world(src, cam), valid


def chunk_overlap(chunk_c2w, target_c2w, K, hw, chunk_depth=None, **kw) -> np.ndarray:
    """How much of a target chunk's view each past chunk shows: (n,) in [0, 1].

    chunk_c2w (n, f, 4, 4) past chunks, target_c2w (t, 4, 4) the target's frames,
    chunk_depth (n, f, h, w) optional. For each target frame, the best `fov_overlap` of
    any of the chunk's frames with it (the chunk frame that shares most with it); then
    the mean over the target frames, so a chunk that covers every target frame scores 1.
    `kw` goes to `fov_overlap` (near, far, grid, depths).
    """
    chunks = _check_chunks("chunk_c2w", chunk_c2w, 4)
    target = _check_chunks("target_c2w", target_c2w, 3)
    K, (h, w) = camera.check_K(K), _check_hw(hw)
    n, f = chunks.shape[:2]
    flat_depth = None
    if chunk_depth is not None:
        flat_depth = _check_depth("chunk_depth", chunk_depth, (n, f, h, w)).reshape(-1, h, w)
    if n == 0:
        return np.zeros(0)
    opts = {"near": 0.5, "far": 8.0, "grid": 8, "depths": 6, **kw}
    _check_range(opts["near"], opts["far"])
    points, valid = _frustum_points(  # once for every target frame
        chunks.reshape(-1, 4, 4), K, h, w, flat_depth, False, opts["near"], opts["far"],
        _check_int("grid", opts["grid"], 1), _check_int("depths", opts["depths"], 1))
    best = [_seen_share(points, valid, dst, K, h, w).reshape(n, f).max(1)
            for dst in target]  # t x (n,)
    return np.mean(best, axis=0)


# ----------------------------------------------------------------------------------------
# The selection rule
# ----------------------------------------------------------------------------------------


SCORED = 16  # chunks whose overlap is computed per selection (the nearest views)


def _check_selection(chunk_c2w, target_index, window, retrieve, sink, K, hw, chunk_depth):
    chunks = _check_chunks("chunk_c2w", chunk_c2w, 4)
    camera.check_K(K)
    _check_hw(hw)
    t = _check_int("target_index", target_index, 0)
    if t >= len(chunks):
        raise ValueError(f"target_index must be < the number of chunks {len(chunks)} (its "
                         f"own poses are needed), got {t}")
    if not isinstance(sink, (bool, np.bool_)):
        raise ValueError(f"sink must be a bool, got {sink!r}")
    window, retrieve = _check_int("window", window, 0), _check_int("retrieve", retrieve, 0)
    if chunk_depth is not None:
        depth = np.asarray(chunk_depth)
        if depth.ndim != 4 or not t <= len(depth) <= len(chunks):
            raise ValueError(f"chunk_depth must be (m, f, h, w) covering at least the "
                             f"{t} chunks before the target (m in [{t}, {len(chunks)}]), "
                             f"got shape {depth.shape}")
    return chunks, t, window, retrieve, bool(sink)


def _nearest_views(chunks: np.ndarray, target: np.ndarray, keep: int, near: float = 0.5,
                   far: float = 8.0) -> np.ndarray:
    """Indices of the `keep` chunks (n, f, 4, 4) whose views come nearest the target's
    (t, 4, 4): the distance between the centres of the frusta (the point (near + far) / 2
    ahead of each camera), the smallest over frame pairs. A view whose centre is far from
    every target frame's cannot share much with it; scoring only these keeps a chunk's cost
    flat however long the rollout."""
    ahead = (near + far) / 2
    centre = lambda c: c[..., :3, 3] + ahead * c[..., :3, 2]  # noqa: E731  (..., 3)
    d = np.linalg.norm(centre(chunks)[:, :, None] - centre(target)[None, None], axis=-1)
    return np.sort(np.argsort(d.min(axis=(1, 2)), kind="stable")[:keep])


def select_memory(chunk_c2w, target_index: int, window: int, retrieve: int, sink: bool, K,
                  hw, chunk_depth=None) -> list[int]:
    """The past chunks shown to the model as memory when it makes chunk `target_index`.

    chunk_c2w (N, f, 4, 4): poses of chunks 0..N-1 of an episode, N > target_index (the
    target's own poses come from the player's controls). chunk_depth (m, f, h, w), optional,
    covers at least chunks 0..target_index-1 (only those are read). Chunks target_index -
    window .. target_index - 1 are in the KV window and are never memory. If `sink` and
    chunk 0 is older than the window, chunk 0 comes first. Then up to `retrieve` older
    chunks (not the sink) with the highest `chunk_overlap` with the target, best first,
    ties to the more recent chunk; a chunk with overlap 0 shares nothing and is not
    retrieved. Only the SCORED chunks whose views come nearest the target's are scored
    (`_nearest_views`), so selection costs the same at chunk 100 as at chunk 10. Returns
    chunk indices: fewer than sink + retrieve early in an episode or when little overlaps,
    possibly none.
    """
    chunks, t, window, retrieve, sink = _check_selection(chunk_c2w, target_index, window,
                                                         retrieve, sink, K, hw, chunk_depth)
    older = t - window  # chunks 0..older-1 are outside the window
    out = [0] if sink and older > 0 else []
    candidates = np.arange(len(out), max(older, 0))
    if retrieve == 0 or len(candidates) == 0:
        return out
    if len(candidates) > SCORED:
        candidates = candidates[_nearest_views(chunks[candidates], chunks[t], SCORED)]
    depth = None if chunk_depth is None else np.asarray(chunk_depth)[candidates]
    score = chunk_overlap(chunks[candidates], chunks[t], K, hw, depth)
    order = np.lexsort((-candidates, -score))  # best first, then the more recent
    return out + [int(candidates[i]) for i in order[:retrieve] if score[i] > 0]


def memory_slots(picked: list[int], slots: int, target: int) -> tuple[list[int], list[bool]]:
    """The chunk of each of `slots` memory slots for chunk `target`, and which are valid:
    the `picked` chunks (`select_memory`) first, then padding. A padding slot is masked
    (valid False: its attention weight is exactly 0, so it is never read) and holds the
    chunk just before the target (the target for chunk 0): a real chunk with a finite
    pose, there in training's clips and in play's bank alike. Training and play both pad
    here, so a model sees the same memory input for the same walk in either."""
    slots, target = _check_int("slots", slots, 0), _check_int("target", target, 0)
    if len(picked) > slots:
        raise ValueError(f"{len(picked)} chunks picked for {slots} memory slots")
    pad = max(target - 1, 0)
    return [int(i) for i in picked] + [pad] * (slots - len(picked)), \
        [True] * len(picked) + [False] * (slots - len(picked))


# ----------------------------------------------------------------------------------------
# The play-time store
# ----------------------------------------------------------------------------------------


def _as_latents(latents):
    """A copy of a numpy array or torch tensor (f, c, h, w); ValueError for anything else."""
    if isinstance(latents, np.ndarray):
        return latents.copy()
    if hasattr(latents, "detach") and hasattr(latents, "clone"):  # a torch tensor
        return latents.detach().clone()
    raise ValueError(f"latents must be a numpy array or a torch tensor (f, c, h, w), got "
                     f"{type(latents).__name__}")


def _stack(items: list):
    if isinstance(items[0], np.ndarray):
        return np.stack(items)
    import torch  # the latents came as torch tensors, so torch is loaded already

    return torch.stack(items)


class ChunkBank:
    """The past chunks of one rollout: latents (f, c, h, w), poses (f, 4, 4) and, when
    given, depth (f, H, W) per chunk, in the order they were made (chunk k = the k-th add).

    Every chunk must match the first one added in shapes, latent type and whether it has
    depth; a chunk that does not raises ValueError and leaves the bank unchanged.
    """

    def __init__(self):
        self._latents, self._c2w, self._depth = [], [], []

    def __len__(self) -> int:
        return len(self._c2w)

    def _check_like_first(self, latents, c2w: np.ndarray, depth) -> None:
        if not len(self):
            return
        first = self._latents[0]
        if type(latents) is not type(first):
            raise ValueError(f"latents must be a {type(first).__name__} like chunk 0, got "
                             f"{type(latents).__name__}")
        for name, new, old in (("latents", latents, first), ("c2w", c2w, self._c2w[0])):
            if tuple(new.shape) != tuple(old.shape):
                raise ValueError(f"{name} of chunk {len(self)} must have shape "
                                 f"{tuple(old.shape)} like chunk 0, got {tuple(new.shape)}")
        if (depth is None) != (self._depth[0] is None):
            had = "no depth" if self._depth[0] is None else "depth"
            raise ValueError(f"depth of chunk {len(self)}: chunk 0 had {had}, every chunk "
                             f"must match")
        if depth is not None and depth.shape != self._depth[0].shape:
            raise ValueError(f"depth of chunk {len(self)} must have shape "
                             f"{self._depth[0].shape} like chunk 0, got {depth.shape}")

    def add(self, latents, c2w, depth=None) -> int:
        """Append chunk k = len(bank): latents (f, c, h, w) (numpy or torch, copied), c2w
        (f, 4, 4) finite rigid poses, depth (f, H, W) optional. Returns k."""
        latents = _as_latents(latents)
        c2w = _check_chunks("c2w", c2w, 3)
        if latents.ndim != 4 or latents.shape[0] != len(c2w):
            raise ValueError(f"latents must be (f, c, h, w) with f = {len(c2w)} frames like "
                             f"c2w, got {tuple(latents.shape)}")
        if depth is not None:
            depth = np.asarray(depth)
            if depth.ndim != 3 or len(depth) != len(c2w):
                raise ValueError(f"depth must be (f, H, W) with f = {len(c2w)}, got "
                                 f"{depth.shape}")
            depth = _check_depth("depth", depth, depth.shape)
        self._check_like_first(latents, c2w, depth)
        self._latents.append(latents)
        self._c2w.append(c2w)
        self._depth.append(depth)
        return len(self) - 1

    def set_latents(self, k: int, latents) -> None:
        """Chunk k's latents (f, c, h, w), replaced by others of the same shape (a chunk
        shown otherwise than it was made: `Stream.show`'s paint)."""
        self._check_indices([k])
        latents, had = _as_latents(latents), self._latents[k]
        if type(latents) is not type(had) or tuple(latents.shape) != tuple(had.shape):
            raise ValueError(f"chunk {k}'s latents are a {type(had).__name__} "
                             f"{tuple(had.shape)}, got a {type(latents).__name__} "
                             f"{tuple(latents.shape)}")
        self._latents[k] = latents

    def truncate(self, n: int) -> None:
        """Keep the first `n` chunks (a rollout that takes back its last chunks)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= len(self):
            raise ValueError(f"n must be an int in [0, {len(self)}], got {n!r}")
        del self._latents[n:], self._c2w[n:], self._depth[n:]

    def select(self, target_c2w, window: int, retrieve: int, sink: bool, K, hw) -> list[int]:
        """`select_memory` for the chunk that would be index len(bank), with poses
        target_c2w (f, 4, 4) (and the bank's depth when it has any)."""
        target = _check_chunks("target_c2w", target_c2w, 3)
        if len(self) and target.shape != self._c2w[0].shape:
            raise ValueError(f"target_c2w must have shape {self._c2w[0].shape} like the "
                             f"bank's chunks, got {target.shape}")
        chunks = np.stack(self._c2w + [target])  # (len + 1, f, 4, 4)
        depth = np.stack(self._depth) if len(self) and self._depth[0] is not None else None
        return select_memory(chunks, len(self), window, retrieve, sink, K, hw, depth)

    def _check_indices(self, indices) -> list[int]:
        indices = list(indices)
        for i in indices:
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)) \
                    or not 0 <= i < len(self):
                raise ValueError(f"chunk index must be an integer in [0, {len(self)}), got "
                                 f"{i!r}")
        if not len(self):
            raise ValueError("the bank is empty: there are no chunks to stack")
        return [int(i) for i in indices]

    def latents(self, indices):
        """The latents of chunks `indices`, stacked (k, f, c, h, w) (numpy or torch, as
        added); k = 0 gives an empty stack of that shape."""
        indices = self._check_indices(indices)
        if not indices:
            return self._latents[0][None][:0]
        return _stack([self._latents[i] for i in indices])

    def poses(self, indices) -> np.ndarray:
        """The poses of chunks `indices`, stacked (k, f, 4, 4) float64."""
        indices = self._check_indices(indices)
        return np.stack([self._c2w[i] for i in indices]) if indices else \
            np.zeros((0,) + self._c2w[0].shape)
