"""The network half of memory: past chunks -> memory tokens, and the gated attention through
which the chunk being generated reads them.

What is remembered (the sink, chunks retrieved by field-of-view overlap) is chosen in
`worldlab.memory`; here a set of k clean past chunks becomes tokens:

- uncompressed (`compress = 1`): every latent patch of every frame is a token, embedded by
  the world's own patch embedding (so a memory token starts as the token the model already
  reads for that patch);
- compressed (`compress = r > 1`, WorldPlay2 / FramePack): each chunk becomes two tokens per
  s x s patches, r = f s^2 / 2 times fewer: a coarse branch (the patch tokens averaged over
  the chunk's frames and the s x s block: low spatial and temporal resolution) and a fine
  branch (a learned convolution over the chunk's frames and the block, causal in time: it
  summarises frames that are all in the past).

Each token carries the camera of its frame *relative to the chunk being generated* (the
first frame of that chunk; translation + axis-angle, through an MLP), and rotary positions
re-assigned relative to that chunk: a memory chunk sits where the previous chunk would,
however long ago it was seen (reframed RoPE), so a chunk from 500 steps back is not at a
distance the model never trained on.

The chunk reads them through `dit.MemoryAttention`, a cross-attention with a
zero-initialised output projection: a world fine-tuned with memory starts exactly where the
world without it was (step 0 equals the base model).

Shape legend: b batch, k memory chunks, f frames per chunk, c latent channels, h w latent
size, g tokens per side, m memory tokens, d width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

from . import conditioning as cond


@dataclass
class MemoryChunks:
    """k clean past chunks for each sample: latents (b, k, f, c, h, w), their cameras c2w
    (b, k, f, 4, 4) absolute, and `valid` (b, k) bool (False: a padding slot, early in an
    episode when fewer chunks are old enough)."""
    latents: torch.Tensor
    c2w: torch.Tensor
    valid: torch.Tensor

    def check(self, b: int, f: int, c: int, size: int, max_chunks: int) -> None:
        lat = self.latents
        if not (isinstance(lat, torch.Tensor) and lat.ndim == 6
                and tuple(lat.shape[:1]) == (b,) and lat.shape[2:] == (f, c, size, size)
                and 1 <= lat.shape[1] <= max_chunks):
            raise ValueError(f"memory latents must be (b={b}, k<= {max_chunks}, f={f}, c={c}, "
                             f"{size}, {size}); got {tuple(getattr(lat, 'shape', ()))}")
        k = lat.shape[1]
        cond.check_tensor("memory c2w", self.c2w, (b, k, f, 4, 4), "(b, k, f, 4, 4) poses")
        if not (isinstance(self.valid, torch.Tensor) and self.valid.dtype == torch.bool
                and tuple(self.valid.shape) == (b, k)):
            raise ValueError(f"memory valid must be a bool (b={b}, k={k}) tensor; got "
                             f"{getattr(self.valid, 'dtype', None)} "
                             f"{tuple(getattr(self.valid, 'shape', ()))}")
        if cond.checking_values() and not bool(torch.isfinite(lat).all()):
            raise ValueError("memory latents must be finite")

    def to(self, device) -> "MemoryChunks":
        return MemoryChunks(self.latents.to(device), self.c2w.to(device),
                            self.valid.to(device))


@dataclass
class MemoryRead:
    """Memory encoded for one chunk (`WorldModel.read_memory`): what the generated chunk's
    memory attention reads, the same at every sampling step of that chunk, so a sampler
    encodes it once, not once a step. `origin` is the chunk's first frame, `reference`
    (b, 4, 4) its first camera; `encoded` holds the tokens (b, m, d), key mask (b, m) and
    RoPE of keys and queries; `kv` each block's (K, V), each (b, heads, m, hd)."""
    origin: int
    reference: torch.Tensor
    encoded: dict
    kv: list

    def check(self, origin: int, reference: torch.Tensor) -> None:
        if origin != self.origin or not torch.equal(reference, self.reference):
            raise ValueError(f"this memory was read for the chunk at frame {self.origin} and "
                             f"its cameras, not for the chunk at frame {origin}: read it again "
                             f"(WorldModel.read_memory) for each chunk")


def pool_side(compress: int, chunk_frames: int, grid: int) -> int:
    """The block side s of `compress` = f s^2 / 2 (0 for compress 1); a ValueError naming
    the field when no integer s dividing the token grid gives it."""
    if compress == 1:
        return 0
    s = math.isqrt(2 * compress // chunk_frames) if 2 * compress % chunk_frames == 0 else 0
    if s < 1 or chunk_frames * s * s != 2 * compress or grid % s:
        ok = [chunk_frames * q * q // 2 for q in range(1, grid + 1)
              if grid % q == 0 and chunk_frames * q * q % 2 == 0]
        raise ValueError(f"model.memory_compress={compress} must be f s^2 / 2 for a block side "
                         f"s dividing the {grid}x{grid} token grid (f={chunk_frames}): one of "
                         f"{[1] + [r for r in ok if r > 1]}")
    return s


def tokens_per_chunk(compress: int, chunk_frames: int, grid: int) -> int:
    s = pool_side(compress, chunk_frames, grid)
    return chunk_frames * grid * grid if s == 0 else 2 * (grid // s) ** 2


def relative_camera(c2w: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Cameras c2w (b, ..., 4, 4) in the frame of `reference` (b, 4, 4): (b, ..., 6)
    translation (metres) + axis-angle (radians), float64."""
    ref = reference.double()
    shape = (ref.shape[0],) + (1,) * (c2w.ndim - 3) + (4, 4)
    rel = torch.linalg.inv(ref).reshape(shape) @ c2w.double()
    return torch.cat([rel[..., :3, 3], cond.rotation_to_axis_angle(rel[..., :3, :3])], -1)


class MemoryEncoder(nn.Module):
    """Memory chunks -> tokens (b, m, d), their key mask (b, m) and RoPE positions (m, 3)
    relative to the generated chunk's first frame (frame offset -f .. -1: the slot of the
    previous chunk)."""

    def __init__(self, d: int, chunk_frames: int, grid: int, compress: int):
        super().__init__()
        self.f, self.grid = chunk_frames, grid
        self.s = pool_side(compress, chunk_frames, grid)
        self.per_chunk = tokens_per_chunk(compress, chunk_frames, grid)
        self.pose = nn.Sequential(nn.Linear(cond.POSE_FEATURES, d), nn.SiLU(), nn.Linear(d, d))
        if self.s:
            s = self.s
            self.fine = nn.Conv3d(d, d, kernel_size=(chunk_frames, s, s),
                                  stride=(chunk_frames, s, s))
            self.branch = nn.Parameter(torch.zeros(2, d))  # tells coarse from fine

    def forward(self, patch_tokens: torch.Tensor, memory: MemoryChunks, reference: torch.Tensor):
        """patch_tokens (b, k, f, g, g, d): the chunks' latents through the world's patch
        embedding; reference (b, 4, 4) the generated chunk's first camera."""
        b, k = patch_tokens.shape[:2]
        pose = self.pose(relative_camera(memory.c2w, reference).to(patch_tokens.dtype))
        if not self.s:  # every patch: the frame's camera on each of its tokens
            x = patch_tokens + pose[:, :, :, None, None]  # (b, k, f, g, g, d)
            tokens = rearrange(x, "b k f gh gw d -> b (k f gh gw) d")
        else:
            tokens = self._compressed(patch_tokens, pose.mean(2))
        mask = memory.valid.repeat_interleave(self.per_chunk, dim=1)  # (b, m)
        return tokens, mask, self.positions(k, patch_tokens.device)

    def _compressed(self, x: torch.Tensor, pose: torch.Tensor) -> torch.Tensor:
        """(b, k, f, g, g, d) -> (b, k * 2 (g/s)^2, d): coarse then fine tokens per chunk,
        each with the chunk's mean camera `pose` (b, k, d)."""
        b, s = x.shape[0], self.s
        vol = rearrange(x, "b k f gh gw d -> (b k) d f gh gw")
        coarse = F.avg_pool3d(vol, (self.f, s, s))  # (b k, d, 1, g/s, g/s)
        fine = self.fine(vol)
        both = torch.stack([coarse, fine], 1).flatten(3)  # (b k, 2, d, (g/s)^2)
        both = rearrange(both, "(b k) two d q -> b k two q d", b=b)
        both = both + self.branch[:, None] + pose[:, :, None, None]
        return rearrange(both, "b k two q d -> b (k two q) d")

    def positions(self, k: int, device) -> torch.Tensor:
        """(m, 3) float positions (frame, row, col) of k chunks' tokens, frame offsets
        relative to the generated chunk's first frame."""
        g, f = self.grid, self.f
        if not self.s:
            fr, r, c = torch.meshgrid(torch.arange(-f, 0.0), torch.arange(g * 1.0),
                                      torch.arange(g * 1.0), indexing="ij")
            one = torch.stack([fr, r, c], -1).reshape(-1, 3)
        else:
            centres = torch.arange(0, g, self.s, dtype=torch.float32) + (self.s - 1) / 2
            r, c = torch.meshgrid(centres, centres, indexing="ij")
            cell = torch.stack([torch.full_like(r, -(f + 1) / 2), r, c], -1).reshape(-1, 3)
            one = torch.cat([cell, cell])  # coarse, fine
        return one.repeat(k, 1).to(device)
