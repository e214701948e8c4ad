"""`Stream`: one rollout of a world, the one place chunks are made at run time.

Play (`play.WorldSession`), every evaluation protocol and the notebooks make their chunks
through a `Stream`; the sampler (`model.sampler`) keeps the math it calls, and training's
own rollouts. A stream holds the KV window (`KVCache`) and, when `config.memory` switches
any on, what carries the past beyond it; with memory off it is the plain KV stream.
Before each chunk it gathers that chunk's memory:

- the **sink** and the chunks **retrieved** by field-of-view overlap with the chunk's
  cameras (`retrieval.select_memory`, the same rule as in training) from a `ChunkBank` of
  every chunk so far, given to the model as `MemoryChunks` (padded to a fixed number of
  slots, so every chunk costs the same);
- the **3D cache**: past frames (every `cache_stride`-th) fused into a `PointCache` with
  depth from the engine ("oracle") or from a depth head on the frames ("own"), rendered
  into the chunk's cameras, encoded, with its coverage.

A true chunk goes in with `append_truth`; a made one with `generate` then `append` (or
`step`, both), then `show` with its decoded frames (and the engine's depth, read by the
oracle cache only): they are fused into the 3D cache (`observe`) and, with
`sample.composite = "cache"`, first painted with its render where it covers them, so the
world draws only what the cache does not hold (a place seen before comes back as it was
seen), and the painted frames, encoded, replace the chunk's latents as the next chunks'
context (the world goes on from what it showed); the own cache fuses a painted pixel at
the depth it was rendered at, so what it holds stays where it was first put. With
`sample.paint_view` the last true frame (the engine's, before the first chunk the world
makes) is painted first into that chunk, moved into each camera with its depth
(`cache3d.view_warp`): a surface seen closer than before is drawn whole where the cache's
points would scatter.
`snapshot`/`restore` take back chunks (a failed chunk in play); `to_tensors`/`load_tensors`
save and load the whole stream bit for bit.

Shape legend: f frames per chunk, c latent channels, h w latent size, H W frame size,
k memory slots, n chunks in the bank, p points, L cached tokens, hd head width.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..config import MemoryConfig, SampleConfig, uses_memory
from ..model.autoencoder import frames_to_tensor
from ..model.memory_tokens import MemoryChunks
from ..model.sampler import append_generated, sample_chunk
from .cache3d import PointCache, check_depth, check_rgb, view_warp
from .retrieval import ChunkBank, memory_slots

CACHE_VOXEL_M = 0.05  # point-cache cell: about a pixel at 3 m in a 64-pixel frame
CACHE_SPLAT = 2  # pixels per rendered point: fills the gaps between sparse points
# a context chunk waiting for its K/V (`KVCache.pending`) is saved as these inputs, so a
# resumed stream runs it in the same pass as the live one would: the same numbers
PENDING_INPUTS = ("x", "t", "actions", "c2w", "text")
POINT_ARRAYS = ("points", "colors", "keys", "seen")  # a PointCache.snapshot's arrays
VIEW_ARRAYS = ("view_rgb", "view_depth", "view_c2w")  # the view sample.paint_view paints


def cache_latent(autoencoder, points: PointCache, c2w: np.ndarray, K: np.ndarray, size: int,
                 device, renders: list | None = None) -> torch.Tensor:
    """The point cache rendered into cameras c2w (f, 4, 4), encoded: (1, f, c + 1, h, w),
    the latent of the render and the share of each latent cell the render covers.
    `renders`, when given, are those renders already made (`render_chunk`)."""
    renders = [r[CACHE_SPLAT] for r in renders or render_chunk(points, c2w, K, size)]
    rgb, cover = [r[0] for r in renders], [r[2] for r in renders]
    lat = autoencoder.encode(frames_to_tensor(np.stack(rgb))[None].to(device))  # (1, f, c, h, w)
    mask = torch.as_tensor(np.stack(cover), dtype=lat.dtype, device=device)[:, None]
    cov = F.adaptive_avg_pool2d(mask, lat.shape[-2:])[None]  # (1, f, 1, h, w)
    return torch.cat([lat * (cov > 0), cov], dim=2)


def render_chunk(points: PointCache, c2w: np.ndarray, K: np.ndarray, size: int,
                 splats: tuple[int, ...] = (CACHE_SPLAT,), blend: float = 0.0) -> list[dict]:
    """[{splat: (rgb, depth, mask)}] of the point cache in each camera of c2w (f, 4, 4), the
    points projected once per camera: CACHE_SPLAT pixels a point is what the model reads
    (`cache_latent`) and fills painted holes; one pixel a point is what is painted. `blend`:
    the soft z-buffer of `PointCache.render_splats` (sample.paint_blend when painting)."""
    return [points.render_splats(pose, K, size, size, splats, blend) for pose in c2w]


NO_MEMORY = MemoryConfig()  # every memory off: the plain KV stream


def world_stream(world, K=None, memory: MemoryConfig | None = None, depth_head=None
                 ) -> "Stream":
    """A new stream of a `pretrained.World` with its memory (or `memory`, e.g. NO_MEMORY),
    its sampling settings and its depth head (or `depth_head`); K (3, 3) the cameras'
    intrinsics at the frame size, needed by a memory."""
    return Stream(world.model, world.ae, world.config.memory if memory is None else memory,
                  world.config.sample, K, depth_head=depth_head or world.depth_head)


class Stream:
    """One rollout of `model` with the memory `memory` (see the module docstring; memory
    all off: the plain KV stream). K are the cameras' intrinsics at the frame size (needed
    only with memory), `depth_head` (frames -> depth) is needed for memory.cache3d = "own"."""

    def __init__(self, model, autoencoder, memory: MemoryConfig, sample: SampleConfig, K=None,
                 depth_head=None):
        if sample.composite == "cache" and sample.paint_yield > 0 and depth_head is None:
            raise ValueError(f"sample.paint_yield={sample.paint_yield} weighs the world's pixels "
                             f"by their depth: pass depth_head (a world's depth head, see "
                             f"train.depth_head)")
        if memory.cache3d == "own" and depth_head is None:
            raise ValueError("memory.cache3d='own' fuses the model's frames with its own depth: "
                             "pass depth_head (a world's depth head, see train.depth_head)")
        if uses_memory(memory) and K is None:
            raise ValueError("a stream with memory needs K, the cameras' (3, 3) intrinsics at "
                             "the frame size (retrieval and the 3D cache project with it)")
        self.model, self.ae, self.memory, self.sample = model, autoencoder, memory, sample
        self.K = None if K is None else np.asarray(K, np.float64)
        self.depth_head = depth_head
        self.cache = model.new_cache(1)
        # the bank keeps every chunk (memory reads it, the 3D cache its poses): only with memory
        self.bank = ChunkBank() if uses_memory(memory) else None
        self.points = PointCache(CACHE_VOXEL_M, memory.cache_points) \
            if memory.cache3d != "off" else None
        self.slots = int(memory.sink) + memory.retrieve
        self.last_memory: list[int] = []
        self.last_tokens = 0
        self._frames = 0  # frames observed (for the cache stride)
        self._renders = None  # (frames observed, c2w, render_chunk) of the last generate
        # the engine's last frame, its depth and camera, until the world draws one: painted
        # first (sample.paint_view, `observe`)
        self._view = None

    @property
    def device(self):
        return next(self.model.parameters()).device

    # ---- chunks in -----------------------------------------------------------------------

    def append_truth(self, latents: torch.Tensor, cond: dict, rgb: np.ndarray | None = None,
                     depth=None, c2w: np.ndarray | None = None) -> None:
        """A true chunk (1, f, c, h, w) (a context chunk, or every one of a teacher-forced
        stream) with its conditions (actions, c2w (1, f, 4, 4), text) and frames (f, H, W,
        3) (read by the 3D cache only): into the cache, the bank, the 3D cache. Its K/V are
        computed with the next chunk's first pass (deferred). `c2w` (f, 4, 4), when known in
        float64 (play's own poses), places it in memory instead of cond's float32 ones."""
        if self.points is not None and rgb is None:
            raise ValueError("a stream with a 3D cache fuses every chunk's frames: "
                             "append_truth needs rgb (f, H, W, 3)")
        self.model.append_chunk(latents, self.cache, defer=True, **cond)
        if self.bank is not None:
            self.bank.add(latents[0], cond["c2w"][0].double().cpu().numpy() if c2w is None
                          else c2w)
            self.observe(rgb, depth, truth=True)

    @torch.no_grad()
    def generate(self, noise: torch.Tensor, cond: dict, steps: int | None = None) -> torch.Tensor:
        """The next chunk (1, f, c, h, w) from noise with the conditions `cond` (actions, c2w
        (1, f, 4, 4), text), reading memory; nothing is appended (`append`, or
        `append_truth` for a teacher-forced stream, must follow)."""
        extra = {}
        if self.bank is not None:
            c2w = cond["c2w"][0].double().cpu().numpy()
            size = noise.shape[-1] * self.ae.downsample
            if self.slots:
                extra["memory"] = self._memory(c2w, (size, size))
            if self.points is not None:
                paint = self.sample.composite == "cache"
                renders = render_chunk(self.points, c2w, self.K, size,
                                       (CACHE_SPLAT, 1) if paint else (CACHE_SPLAT,),
                                       self.sample.paint_blend if paint else 0.0)
                # the cache does not change before `show` paints this chunk: kept for it
                self._renders = (self._frames, c2w, renders)
                if self.model.config.cache_latent:  # else the cache only paints
                    extra["cache_latent"] = cache_latent(self.ae, self.points, c2w, self.K,
                                                         size, self.device, renders)
        s = self.sample
        return sample_chunk(self.model, self.cache, noise, steps or s.steps, s.solver,
                            s.guidance, **cond, **extra)

    def append(self, x: torch.Tensor, cond: dict, generator=None) -> None:
        """A generated chunk x (1, f, c, h, w) into the KV cache (noised by the sampling
        settings' context_noise, drawn from `generator`) and the bank."""
        append_generated(self.model, self.cache, x, self.sample.context_noise, generator,
                         **cond)
        if self.bank is not None:
            self.bank.add(x[0], cond["c2w"][0].double().cpu().numpy())

    @torch.no_grad()
    def step(self, noise: torch.Tensor, cond: dict, steps: int | None = None,
             generator=None) -> torch.Tensor:
        """Generate the next chunk and append it (`generate`, then `append`). `show` must
        follow with its decoded frames when the world has a 3D cache."""
        x = self.generate(noise, cond, steps)
        self.append(x, cond, generator)
        return x

    def observe(self, rgb: np.ndarray, depth=None, known=None, truth: bool = False) -> None:
        """The decoded frames (f, H, W, 3) of the last chunk (and the engine's depth (f, H,
        W), read by the oracle cache only): fused into the 3D cache. `known` (f, H, W),
        finite where the depth of a pixel is already known (the cache's render at a pixel
        `show` painted), gives the own cache that depth there, the depth head's elsewhere:
        a surface the cache holds is fused where it already lies, not moved by a new guess.
        With sample.paint_view, the last of the engine's frames (`truth`, as append_truth
        gives them), with that depth, is the view painted first into the next chunk; frames
        the world drew end it: moved again every chunk, a drawn frame would carry its errors
        along, where the cache keeps them where they were put."""
        if self.points is None:
            return
        c2w = self.bank.poses([len(self.bank) - 1])[0]
        if self.memory.cache3d == "own":
            depth = self.depth_head.predict(rgb)
            if known is not None:
                depth = np.where(np.isfinite(known), known, depth)
        elif depth is None:
            raise ValueError("memory.cache3d='oracle' fuses the engine's depth: observe needs "
                             "depth (f, H, W)")
        if len(rgb) != len(c2w) or len(depth) != len(c2w):
            raise ValueError(f"observe takes the last chunk's {len(c2w)} frames and depth maps, "
                             f"got {len(rgb)} frames and {len(depth)} depth maps")
        for i in range(len(rgb)):  # every frame checked before any is fused
            check_depth(f"depth[{i}]", depth[i], check_rgb(f"rgb[{i}]", rgb[i]).shape[:2])
        for i in range(len(rgb)):
            if (self._frames + i) % self.memory.cache_stride == 0:
                self.points.fuse(rgb[i], depth[i], c2w[i], self.K)
        self._frames += len(rgb)
        if self.sample.paint_view != "off":
            self._view = (np.array(rgb[-1], np.uint8), np.array(depth[-1], np.float32),
                          np.array(c2w[-1], np.float64)) if truth else None

    def show(self, rgb: np.ndarray, depth=None) -> np.ndarray:
        """The last generated chunk's decoded frames (f, H, W, 3) as the world shows them:
        with sample.composite = "cache" the pixels the 3D cache covers are its render into
        the chunk's cameras (`_paint`), the world's elsewhere, and they become the chunk's
        context (`_continue_from`); then fused into the 3D cache (`observe`, the engine's
        depth for the oracle cache). A stream without a 3D cache returns them as they
        are."""
        if self.points is None:
            return rgb
        if self.sample.composite == "cache":
            c2w = self.bank.poses([len(self.bank) - 1])[0]
            if len(rgb) != len(c2w):
                raise ValueError(f"show takes the last chunk's {len(c2w)} frames, got "
                                 f"{len(rgb)}")
            kept = self._renders
            fresh = kept is not None and kept[0] == self._frames and np.array_equal(kept[1], c2w)
            near = (self.depth_head.predict(rgb) if self.sample.paint_yield > 0
                    else [None] * len(rgb))  # the world's own depth, where it may stay
            painted = [self._paint(frame, pose, kept[2][k] if fresh else None, near[k])
                       for k, (frame, pose) in enumerate(zip(rgb, c2w))]
            rgb = np.stack([frame for frame, _ in painted])
            self._continue_from(rgb)
            self.observe(rgb, depth, known=np.stack([d for _, d in painted]))
            return rgb
        self.observe(rgb, depth)
        return rgb

    def _continue_from(self, rgb: np.ndarray) -> None:
        """The painted frames (f, H, W, 3) become the last chunk's context: encoded, they
        replace the latents it was made with in the bank and in its pending pass, keeping
        that pass's context noise (x_s = (1 - s) x0 + s noise, so x0 -> x0' adds
        (1 - s)(x0' - x0)). The world goes on from what it showed."""
        pending, k = self.cache.pending, len(self.bank) - 1
        if pending is None:
            raise ValueError("show paints the chunk just made: call it right after step (or "
                             "append), before the stream is flushed or saved")
        new = self.ae.encode(frames_to_tensor(rgb)[None].to(self.device))  # (1, f, c, h, w)
        old = torch.as_tensor(self.bank.latents([k])).to(new)  # (1, f, c, h, w)
        s = pending["t"].view(-1, 1, 1, 1, 1).to(new)
        x = pending["x"] + ((1 - s) * (new - old)).to(pending["x"])
        self.cache.pending = {**pending, "x": x}  # a new dict: snapshots hold the old one
        self.bank.set_latents(k, new[0])

    def _paint(self, frame: np.ndarray, pose: np.ndarray, renders=None, depth=None
               ) -> tuple[np.ndarray, np.ndarray]:
        """One frame (H, W, 3) painted with the cache's render into camera `pose` (a soft
        z-buffer, sample.paint_blend): every pixel a point lands on, and the holes between
        them (a pixel three of whose four neighbours are painted) from the CACHE_SPLAT
        render; with sample.paint_view, first the engine's last frame moved into `pose`
        (`cache3d.view_warp`) wherever it sees, if no drawn frame came after it; the
        world's pixels elsewhere, and where the world drew something nearer than what is
        painted: its depth (H, W), when given, under sample.paint_yield times the painted
        depth (a character the prompt brought stands in front of the wall the cache
        remembers).
        Returns (the frame, the painted depth (H, W) at the painted pixels, inf
        elsewhere). `renders` ({splat: render}) when `generate` made them already."""
        frame, painted = self._paint_cache(frame, pose, renders, depth)
        if self._view is None:
            return frame, painted
        seen, seen_depth, saw = view_warp(*self._view, pose, self.K,
                                          interp=self.sample.paint_view)
        if depth is not None:
            saw = saw & ~(depth < self.sample.paint_yield * seen_depth)
        return np.where(saw[..., None], seen, frame), np.where(saw, seen_depth, painted)

    def _paint_cache(self, frame: np.ndarray, pose: np.ndarray, renders=None, depth=None
                     ) -> tuple[np.ndarray, np.ndarray]:
        """`_paint`'s render of the point cache alone."""
        h, w = frame.shape[:2]
        renders = renders or self.points.render_splats(pose, self.K, h, w, (1, CACHE_SPLAT),
                                                       self.sample.paint_blend)
        (one, d1, landed), (two, d2, near) = renders[1], renders[CACHE_SPLAT]
        p = np.pad(landed, 1)
        around = (p[:-2, 1:-1].astype(np.int8) + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])
        hole = ~landed & near & (around >= 3)
        if depth is not None:
            landed = landed & ~(depth < self.sample.paint_yield * d1)
            hole = hole & ~(depth < self.sample.paint_yield * d2)
        return (np.where(landed[..., None], one, np.where(hole[..., None], two, frame)),
                np.where(landed, d1, np.where(hole, d2, np.inf)))

    # ---- the memory of one chunk -----------------------------------------------------------

    def _memory(self, c2w: np.ndarray, hw: tuple[int, int]) -> MemoryChunks:
        """The sink and retrieved chunks for a chunk at cameras c2w (f, 4, 4), padded to
        the stream's slots by `memory_slots`, the rule training's clips use too."""
        m = self.memory
        picked = self.bank.select(c2w, self.model.config.window_chunks, m.retrieve, m.sink,
                                  self.K, hw)
        self.last_memory = list(picked)
        self.last_tokens = len(picked) * self.model.memory_encoder.per_chunk
        chunks, valid = memory_slots(picked, self.slots, len(self.bank))
        lat = torch.as_tensor(self.bank.latents(chunks)).float()  # (k, f, c, h, w)
        poses = torch.as_tensor(self.bank.poses(chunks), dtype=torch.float32)  # (k, f, 4, 4)
        return MemoryChunks(lat[None], poses[None], torch.tensor([valid])).to(self.device)

    # ---- taking back and saving ------------------------------------------------------------

    def snapshot(self) -> tuple:
        """What `restore` needs to take back every chunk made after it (cheap: nothing is
        written in place, references suffice)."""
        return (self.cache.snapshot(), None if self.bank is None else len(self.bank),
                self._frames, list(self.last_memory), self.last_tokens,
                None if self.points is None else self.points.snapshot(), self._view)

    def restore(self, snapshot: tuple) -> None:
        cache, n, self._frames, self.last_memory, self.last_tokens, points, self._view = snapshot
        self._renders = None
        self.cache.restore(cache)
        if n is not None:
            self.bank.truncate(n)
        if points is not None:
            self.points.restore(points)

    def to_tensors(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, JSON-able metadata) that `load_tensors` turns back into this stream:
        the KV cache ("cache.*": per-layer K/V (1, heads, L, hd), the last pose, a chunk
        waiting for its K/V as its inputs) and the memory ("memory.*": the bank's latents
        (n, f, c, h, w) and poses (n, f, 4, 4), K, the point cache's arrays and, with
        sample.paint_view, the view's frame, depth and camera while there is one)."""
        tensors = _cache_tensors(self.cache)
        meta = {"chunks": self.cache.chunks, "memory": None}
        if self.bank is None:
            return tensors, meta
        every = range(len(self.bank))
        if len(self.bank):
            tensors["memory.latents"] = torch.as_tensor(self.bank.latents(every)).cpu()
            tensors["memory.c2w"] = torch.from_numpy(self.bank.poses(every).copy())
        tensors["memory.K"] = torch.from_numpy(self.K.copy())
        meta["memory"] = {"chunks": len(self.bank), "frames": self._frames,
                          "last_memory": list(self.last_memory),
                          "last_tokens": self.last_tokens}
        if self.points is not None:
            *arrays, meta["memory"]["fuses"] = self.points.snapshot()
            for name, array in zip(POINT_ARRAYS, arrays):
                tensors[f"memory.{name}"] = torch.from_numpy(array.copy())
        if self._view is not None:
            meta["memory"]["view"] = True
            for name, array in zip(VIEW_ARRAYS, self._view):
                tensors[f"memory.{name}"] = torch.from_numpy(array.copy())
        return tensors, meta

    def load_tensors(self, tensors: dict, meta: dict) -> None:
        """Fill this new stream from `to_tensors`' output (checked by the caller, e.g.
        `play.saved.check_tensors`), copied into torch's own (aligned) memory on the
        model's device: a kernel's last bits can depend on where its input sits."""
        own = lambda key: tensors[key].to(self.device, copy=True)  # noqa: E731
        _load_cache(self.cache, tensors, meta["chunks"], own)
        memory = meta.get("memory")
        if self.bank is None or memory is None:
            return
        if memory["chunks"]:
            latents = own("memory.latents")  # (n, f, c, h, w)
            for j in range(memory["chunks"]):
                self.bank.add(latents[j], tensors["memory.c2w"][j].numpy())
        self._frames, self.last_tokens = memory["frames"], memory["last_tokens"]
        self.last_memory = list(memory["last_memory"])
        if self.points is not None:
            arrays = [tensors[f"memory.{name}"].numpy().copy() for name in POINT_ARRAYS]
            self.points.restore((*arrays, memory["fuses"]))
        if memory.get("view") and self.sample.paint_view != "off":
            self._view = tuple(tensors[f"memory.{name}"].numpy().copy() for name in VIEW_ARRAYS)


def _cache_tensors(cache) -> dict[str, torch.Tensor]:
    """The KV cache as named CPU tensors (`Stream.to_tensors`)."""
    tensors = {}
    for i, (k, v) in enumerate(zip(cache.keys, cache.values)):
        if k is not None:
            tensors[f"cache.k.{i}"], tensors[f"cache.v.{i}"] = k.cpu(), v.cpu()
    if cache.last_pose is not None:
        tensors["cache.last_pose"] = cache.last_pose.cpu()
    if cache.pending is not None:
        for name in PENDING_INPUTS:
            tensors[f"cache.pending.{name}"] = cache.pending[name].cpu()
    return tensors


def _load_cache(cache, tensors: dict, chunks: int, own) -> None:
    """The inverse of `_cache_tensors`, into a new, empty cache."""
    cache.chunks = chunks
    for i in range(len(cache.keys)):
        if f"cache.k.{i}" in tensors:
            cache.keys[i], cache.values[i] = own(f"cache.k.{i}"), own(f"cache.v.{i}")
    if "cache.last_pose" in tensors:
        cache.last_pose = own("cache.last_pose")
    if "cache.pending.x" in tensors:
        cache.pending = dict(text_drop=None, cache_latent=None, **{
            name: own(f"cache.pending.{name}") for name in PENDING_INPUTS})
