"""A small depth head: frames -> metric z-depth, so the 3D-cache memory can fuse the world
model's own frames (`memory.cache3d = "own"`) without the engine's depth.

`memory.stream.Stream.observe` (play) and `train.cache_inputs.cache3d_latents` (training) call
`predict(rgb)` on uint8 frames and back-project its depth into the point cache; the head is
trained on the engine's frames and depth by `worldlab.train.depth_head`.

The network is a 3-level U-Net that never convolves at full resolution (as `FastDecoder`):
the frame is folded 2x2 into channels (`PixelUnshuffle`), two coordinate channels are added
(in DOOM the image row says much about the floor's and ceiling's distance, and zero padding
alone tells a convolution little about where it is), and the last level predicts 2x2
pixels per position (`PixelShuffle`). With the default channels (16, 32, 64) it has ~120 k
parameters and costs ~31 M multiply-adds a 64 px frame:

    level   resolution   channels
    0       h/2          16       unshuffle + coords (14) -> block; skip
    1       h/4          32       max-pool, block; skip
    2       h/8          64       max-pool, block
    up 1    h/4          32       nearest x2, concat skip 1, block
    up 0    h/2          16       nearest x2, concat skip 0, block, conv to 1 * 2 * 2
    out     h            1        pixel shuffle: log-depth

A block is two 3x3 convolutions, each followed by GroupNorm (`norm_groups`, 0 for none) and
SiLU. The output is natural-log metric depth; engine depth that is `inf` (nothing hit) or
beyond `max_depth_m` is learnt as `max_depth_m`.

Shape legend: n frames, b batch, c channels, h w height width.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from diffusers import ConfigMixin, ModelMixin
from diffusers.configuration_utils import register_to_config
from torch import nn

from .autoencoder import frames_to_tensor

# The nearest depth `predict` returns. The point cache back-projects every pixel, so each
# depth must be finite and positive: a zero or negative depth puts a point at or behind the
# camera. 5 cm is well inside anything an engine renders (DOOM's player keeps ~0.5 m from a
# wall), so the clamp only catches a wild prediction.
MIN_DEPTH_M = 0.05
PREDICT_BATCH = 64  # frames a forward pass in `predict`: bounded memory on any episode


def _norm(channels: int, groups: int) -> nn.Module:
    return nn.GroupNorm(groups, channels) if groups else nn.Identity()


class Block(nn.Sequential):
    """(conv 3x3, GroupNorm, SiLU) twice: (b, c_in, h, w) -> (b, c_out, h, w)."""

    def __init__(self, c_in: int, c_out: int, groups: int):
        super().__init__(nn.Conv2d(c_in, c_out, 3, padding=1), _norm(c_out, groups),
                         nn.SiLU(), nn.Conv2d(c_out, c_out, 3, padding=1),
                         _norm(c_out, groups), nn.SiLU())


class DepthHead(ModelMixin, ConfigMixin):
    """Frames (b, 3, h, w) in [-1, 1] -> natural-log metric z-depth (b, 1, h, w); h and w
    must be multiples of 2^len(block_out_channels)."""

    @register_to_config
    def __init__(self, block_out_channels: tuple[int, ...] = (16, 32, 64),
                 norm_groups: int = 8, max_depth_m: float = 20.0):
        super().__init__()
        ch = list(block_out_channels)
        if len(ch) < 2 or min(ch) < 1:
            raise ValueError(f"DepthHead needs at least 2 levels of positive channels, got "
                             f"block_out_channels {block_out_channels}")
        if norm_groups < 0 or (norm_groups and any(c % norm_groups for c in ch)):
            raise ValueError(f"norm_groups must be 0 (no norm) or divide every level's "
                             f"channels {block_out_channels}, got {norm_groups}")
        if not MIN_DEPTH_M < max_depth_m < math.inf:
            raise ValueError(f"max_depth_m must be finite and above {MIN_DEPTH_M} m, got "
                             f"{max_depth_m}")
        self.fold, self.unfold = nn.PixelUnshuffle(2), nn.PixelShuffle(2)
        self.down = nn.ModuleList([Block(3 * 4 + 2, ch[0], norm_groups)] + [
            Block(ch[i - 1], ch[i], norm_groups) for i in range(1, len(ch))])
        self.up = nn.ModuleList([Block(ch[i + 1] + ch[i], ch[i], norm_groups)
                                 for i in range(len(ch) - 1)])
        self.out = nn.Conv2d(ch[0], 4, 3, padding=1)
        with torch.no_grad():  # start at the geometric middle of [1 m, max_depth_m]
            self.out.bias.fill_(0.5 * math.log(max_depth_m))

    @property
    def multiple(self) -> int:
        """Frame sides must be multiples of this (one fold, then a halving per level)."""
        return 2 ** len(self.config.block_out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Training pass: frames (b, 3, h, w) in [-1, 1] -> log-depth (b, 1, h, w),
        unclamped."""
        b, c, h, w = x.shape
        if c != 3 or h % self.multiple or w % self.multiple:
            raise ValueError(f"DepthHead expects frames (b, 3, h, w) with h and w multiples "
                             f"of {self.multiple}, got {tuple(x.shape)}")
        y, xx = torch.meshgrid(torch.linspace(-1, 1, h // 2, device=x.device, dtype=x.dtype),
                               torch.linspace(-1, 1, w // 2, device=x.device, dtype=x.dtype),
                               indexing="ij")
        coords = torch.stack([y, xx]).expand(b, 2, h // 2, w // 2)
        z = torch.cat([self.fold(x), coords], dim=1)  # (b, 14, h/2, w/2)
        skips = []
        for i, block in enumerate(self.down):
            z = block(z if i == 0 else nn.functional.max_pool2d(z, 2))
            skips.append(z)
        for block, skip in zip(reversed(self.up), reversed(skips[:-1])):
            z = nn.functional.interpolate(z, scale_factor=2.0, mode="nearest")
            z = block(torch.cat([z, skip], dim=1))
        return self.unfold(self.out(z))  # (b, 4, h/2, w/2) -> (b, 1, h, w)

    def to_metres(self, log_depth: torch.Tensor) -> torch.Tensor:
        """Log-depth -> metric depth clamped to [MIN_DEPTH_M, max_depth_m]: finite and
        positive, as the point cache needs. Clamped after exp (an overflow becomes
        max_depth_m), so float32 rounding of exp(log(x)) cannot leave the range."""
        return log_depth.float().exp().clamp(MIN_DEPTH_M, self.config.max_depth_m)

    @torch.no_grad()
    def predict(self, rgb, batch: int = PREDICT_BATCH) -> np.ndarray:
        """uint8 frames (n, h, w, 3) -> metric z-depth float32 (n, h, w) in
        [MIN_DEPTH_M, max_depth_m], in eval mode on the module's device, `batch` frames a
        pass (the module's mode is restored after)."""
        rgb = np.asarray(rgb)
        if rgb.dtype != np.uint8 or rgb.ndim != 4 or rgb.shape[-1] != 3:
            raise ValueError(f"DepthHead.predict expects uint8 frames (n, h, w, 3), got "
                             f"{rgb.dtype} {rgb.shape}")
        param = next(self.parameters())
        out = np.empty(rgb.shape[:3], np.float32)  # (n, h, w)
        was_training = self.training
        self.eval()
        try:
            for i in range(0, len(rgb), batch):
                x = frames_to_tensor(rgb[i:i + batch]).to(param.device, param.dtype)
                out[i:i + batch] = self.to_metres(self(x))[:, 0].cpu().numpy()
        finally:
            self.train(was_training)
        return out
