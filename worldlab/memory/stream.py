"""A rollout with memory: the KV window plus what `config.memory` carries past it.

`MemoryStream` generates chunk after chunk like `sampler.rollout`, and before each chunk
gathers its memory:

- the **sink** and the chunks **retrieved** by field-of-view overlap with the chunk's
  cameras (`retrieval.select_memory`, the same rule as in training) from a `ChunkBank` of
  every chunk so far, given to the model as `MemoryChunks` (padded to a fixed number of
  slots, so every chunk costs the same);
- the **3D cache**: past frames (the model's own, every `cache_stride`-th) fused into a
  `PointCache` with depth from the engine ("oracle") or from a depth head on the model's
  own frames ("own"), rendered into the chunk's cameras, encoded, with its coverage.

The stream keeps no frames it does not need: latents and poses in the bank, points in the
cache. `observe` hands it each decoded chunk (and the engine's depth, read only by the
oracle cache).

Shape legend: f frames per chunk, c latent channels, h w latent size, H W frame size,
k memory slots.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..config import MemoryConfig, SampleConfig
from ..model.autoencoder import frames_to_tensor
from ..model.memory_tokens import MemoryChunks
from ..model.sampler import append_generated, sample_chunk
from .cache3d import PointCache, _check_depth, _check_rgb
from .retrieval import ChunkBank

CACHE_VOXEL_M = 0.05  # point-cache cell: about a pixel at 3 m in a 64-pixel frame
CACHE_SPLAT = 2  # pixels per rendered point: fills the gaps between sparse points


def cache_latent(autoencoder, points: PointCache, c2w: np.ndarray, K: np.ndarray, size: int,
                 device) -> torch.Tensor:
    """The point cache rendered into cameras c2w (f, 4, 4), encoded: (1, f, c + 1, h, w),
    the latent of the render and the share of each latent cell the render covers."""
    rgb, cover = [], []
    for pose in c2w:
        im, _, mask = points.render(pose, K, size, size, splat=CACHE_SPLAT)
        rgb.append(im)
        cover.append(mask)
    lat = autoencoder.encode(frames_to_tensor(np.stack(rgb))[None].to(device))  # (1, f, c, h, w)
    mask = torch.as_tensor(np.stack(cover), dtype=lat.dtype, device=device)[:, None]
    cov = F.adaptive_avg_pool2d(mask, lat.shape[-2:])[None]  # (1, f, 1, h, w)
    return torch.cat([lat * (cov > 0), cov], dim=2)


class MemoryStream:
    """One rollout of `model` with the memory `memory` (see the module docstring); K are
    the cameras' intrinsics at the frame size, `depth_head` (frames -> depth) is needed for
    memory.cache3d = "own"; `cache` a KV cache to stream on (default a new one)."""

    def __init__(self, model, autoencoder, memory: MemoryConfig, sample: SampleConfig, K,
                 depth_head=None, cache=None):
        if memory.cache3d == "own" and depth_head is None:
            raise ValueError("memory.cache3d='own' fuses the model's frames with its own depth: "
                             "pass depth_head (a world's depth head, see train.depth_head)")
        self.model, self.ae, self.memory, self.sample = model, autoencoder, memory, sample
        self.K, self.depth_head = np.asarray(K, np.float64), depth_head
        self.cache = model.new_cache(1) if cache is None else cache
        self.bank = ChunkBank()
        self.points = PointCache(CACHE_VOXEL_M, memory.cache_points) \
            if memory.cache3d != "off" else None
        self.slots = int(memory.sink) + memory.retrieve
        self.last_memory: list[int] = []
        self.last_tokens = 0
        self._frames = 0  # frames observed (for the cache stride)

    @property
    def device(self):
        return next(self.model.parameters()).device

    def append_truth(self, latents: torch.Tensor, cond: dict, rgb: np.ndarray,
                     depth=None) -> None:
        """A true chunk (1, f, c, h, w) (the first, or every one of a teacher-forced stream)
        with its conditions and frames (f, H, W, 3): into the cache, the bank, the 3D
        cache."""
        self.model.append_chunk(latents, self.cache, defer=True, **cond)
        self.remember(latents[0], cond["c2w"][0].double().cpu().numpy(), rgb, depth)

    def remember(self, latents: torch.Tensor, c2w: np.ndarray, rgb: np.ndarray,
                 depth=None) -> None:
        """A true chunk already in the KV cache (latents (f, c, h, w), cameras c2w (f, 4, 4),
        frames (f, H, W, 3)): into the bank and the 3D cache."""
        self.bank.add(latents, c2w)
        self.observe(rgb, depth)

    def _memory(self, c2w: np.ndarray, hw: tuple[int, int]) -> MemoryChunks | None:
        """The sink and retrieved chunks for a chunk at cameras c2w (f, 4, 4), padded to
        the stream's slots; None when the world has no memory attention."""
        if self.slots == 0:
            return None
        m = self.memory
        picked = self.bank.select(c2w, self.model.config.window_chunks, m.retrieve, m.sink,
                                  self.K, hw)
        self.last_memory = list(picked)
        lat0 = self.bank.latents([0])[0]
        lat = torch.zeros((self.slots, *lat0.shape), dtype=lat0.dtype)
        poses = np.repeat(c2w[None], self.slots, 0)  # padding slots: any finite pose
        if picked:
            lat[:len(picked)] = torch.as_tensor(self.bank.latents(picked))
            poses[:len(picked)] = self.bank.poses(picked)
        valid = torch.zeros(1, self.slots, dtype=torch.bool)
        valid[0, :len(picked)] = True
        self.last_tokens = len(picked) * self.model.memory_encoder.per_chunk
        return MemoryChunks(lat[None], torch.as_tensor(poses, dtype=torch.float32)[None],
                            valid).to(self.device)

    @torch.no_grad()
    def generate(self, noise: torch.Tensor, cond: dict, steps: int | None = None) -> torch.Tensor:
        """The next chunk (1, f, c, h, w) from noise with the conditions `cond` (actions, c2w
        (1, f, 4, 4), text), reading memory; nothing is appended (`append`, or
        `append_truth` for a teacher-forced stream, must follow)."""
        c2w = cond["c2w"][0].double().cpu().numpy()
        size = noise.shape[-1] * self.ae.downsample
        extra = {"memory": self._memory(c2w, (size, size))}  # None without memory slots
        if self.points is not None:
            extra["cache_latent"] = cache_latent(self.ae, self.points, c2w, self.K, size,
                                                 self.device)
        s = self.sample
        return sample_chunk(self.model, self.cache, noise, steps or s.steps, s.solver,
                            s.guidance, **cond, **extra)

    def append(self, x: torch.Tensor, cond: dict, generator=None) -> None:
        """A generated chunk x (1, f, c, h, w) into the KV cache (noised by the sampling
        settings' context_noise, drawn from `generator`) and the bank."""
        append_generated(self.model, self.cache, x, self.sample.context_noise, generator,
                         **cond)
        self.bank.add(x[0], cond["c2w"][0].double().cpu().numpy())

    @torch.no_grad()
    def step(self, noise: torch.Tensor, cond: dict, steps: int | None = None) -> torch.Tensor:
        """Generate the next chunk and append it (`generate`, then `append`). `observe` must
        follow with its decoded frames when the world has a 3D cache."""
        x = self.generate(noise, cond, steps)
        self.append(x, cond)
        return x

    def snapshot(self) -> tuple:
        """What `restore` needs to take back the chunks made after it (the KV cache has its
        own snapshot)."""
        return (len(self.bank), self._frames, list(self.last_memory), self.last_tokens,
                None if self.points is None else self.points.snapshot())

    def restore(self, snapshot: tuple) -> None:
        n, self._frames, self.last_memory, self.last_tokens, points = snapshot
        self.bank.truncate(n)
        if points is not None:
            self.points.restore(points)

    def observe(self, rgb: np.ndarray, depth=None) -> None:
        """The decoded frames (f, H, W, 3) of the last chunk (and the engine's depth (f, H,
        W), read by the oracle cache only): fused into the 3D cache."""
        if self.points is None:
            return
        c2w = self.bank.poses([len(self.bank) - 1])[0]
        if self.memory.cache3d == "own":
            depth = self.depth_head.predict(rgb)
        elif depth is None:
            raise ValueError("memory.cache3d='oracle' fuses the engine's depth: observe needs "
                             "depth (f, H, W)")
        if len(rgb) != len(c2w) or len(depth) != len(c2w):
            raise ValueError(f"observe takes the last chunk's {len(c2w)} frames and depth maps, "
                             f"got {len(rgb)} frames and {len(depth)} depth maps")
        for i in range(len(rgb)):  # every frame checked before any is fused
            _check_depth(f"depth[{i}]", depth[i], _check_rgb(f"rgb[{i}]", rgb[i]).shape[:2])
        for i in range(len(rgb)):
            if (self._frames + i) % self.memory.cache_stride == 0:
                self.points.fuse(rgb[i], depth[i], c2w[i], self.K)
        self._frames += len(rgb)
