"""A small, fast decoder for play: normalised latents -> frames, distilled from a world's
full decoder (`worldlab.train.decoder`) and picked by `config.sample.decoder = "fast"`.

The full decoder (`VideoAutoencoder`, the shipped size) spends 965 M multiply-adds a 64 px
frame, 72% of them at the two finest resolutions, in GroupNorm + SiLU ResNet blocks. This
one halves the channels each time it doubles the resolution, so every 3x3 convolution
costs about the same, has no normalisation, and never convolves at full resolution: the
last level (at half resolution) predicts 2x2 pixels per position (`PixelShuffle`). For 8x
compression (155 M multiply-adds a frame with 2 blocks per level):

    level   resolution   channels
    0       h/8          128        conv in, `layers_per_block` residual blocks
    1       h/4          64         nearest x2, conv, blocks
    2       h/2          32         nearest x2, conv, blocks, conv to 3 * 2 * 2
    out     h            3          pixel shuffle

It reads the same normalised latents as `VideoAutoencoder.decode` and returns frames in the
same [-1, 1] range with the same (b, t, c, h, w) interface, so a `World` calls either.

Shape legend: b batch, t time (frames), c channels, h w height width.
"""

from __future__ import annotations

import torch
from diffusers import ConfigMixin, ModelMixin
from diffusers.configuration_utils import register_to_config
from torch import nn

from .autoencoder import flat_latents

LATENT_SOFT_CLIP = 3.0  # latents have unit std: a soft clip at 3 std keeps an outlier of a
# sampled latent from painting a wild colour, and barely touches encoded ones (as TAESD)


class ResidualBlock(nn.Module):
    """x + conv(relu(conv(relu(x)))): two 3x3 convolutions, no normalisation."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(torch.relu(self.conv1(torch.relu(x))))


class FastDecoder(ModelMixin, ConfigMixin):
    """Normalised latents (b, t, c', h', w') -> frames (b, t, 3, 2^L h', 2^L w') in [-1, 1],
    L = len(block_out_channels)."""

    @register_to_config
    def __init__(self, latent_channels: int = 8,
                 block_out_channels: tuple[int, ...] = (128, 64, 32),
                 layers_per_block: int = 2, out_channels: int = 3):
        super().__init__()
        if not block_out_channels or min(block_out_channels) < 1 or layers_per_block < 0:
            raise ValueError(f"FastDecoder needs at least one level of positive channels and "
                             f"layers_per_block >= 0, got block_out_channels "
                             f"{block_out_channels}, layers_per_block {layers_per_block}")
        ch = list(block_out_channels)
        layers: list[nn.Module] = [nn.Conv2d(latent_channels, ch[0], 3, padding=1)]
        for i, c in enumerate(ch):
            if i:  # up one level: nearest x2, then a conv to this level's channels
                layers += [nn.Upsample(scale_factor=2, mode="nearest"),
                           nn.Conv2d(ch[i - 1], c, 3, padding=1)]
            layers += [ResidualBlock(c) for _ in range(layers_per_block)]
        layers += [nn.ReLU(), nn.Conv2d(ch[-1], out_channels * 4, 3, padding=1),
                   nn.PixelShuffle(2)]  # the last doubling: 2x2 pixels per position
        self.layers = nn.Sequential(*layers)

    @classmethod
    def for_autoencoder(cls, ae, layers_per_block: int = 2) -> "FastDecoder":
        """A fresh decoder for `ae`'s latents: one level per doubling, 32 channels at half
        resolution and twice as many a level down (8x: 128, 64, 32)."""
        levels = ae.downsample.bit_length() - 1  # 8 -> 3
        if ae.downsample < 2 or 2 ** levels != ae.downsample:
            raise ValueError(f"a FastDecoder doubles the resolution per level: the "
                             f"autoencoder's downsample must be a power of 2 >= 2, got "
                             f"{ae.downsample}")
        return cls(latent_channels=ae.config.latent_channels,
                   block_out_channels=tuple(32 * 2 ** i for i in reversed(range(levels))),
                   layers_per_block=layers_per_block, out_channels=ae.channels)

    @property
    def downsample(self) -> int:
        """The spatial factor between frames and latents (as `VideoAutoencoder.downsample`)."""
        return 2 ** len(self.config.block_out_channels)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Training pass on single latents (b, c', h', w') -> frames (b, 3, h, w), unclamped."""
        z = torch.tanh(z / LATENT_SOFT_CLIP) * LATENT_SOFT_CLIP
        return self.layers(z)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Normalised latents (b, t, c', h', w') -> frames (b, t, 3, h, w) in [-1, 1]."""
        b, t = latents.shape[:2]
        return self.forward(flat_latents(self, latents)).clamp(-1, 1).unflatten(0, (b, t))


def check_decoder_pair(ae, fast: FastDecoder, where) -> None:
    """Raise ValueError naming `where` (the fast decoder's directory, or what passed it)
    unless `fast` reads `ae`'s latents (the same latent channels) and makes its frames (the
    same spatial factor and channels)."""
    ours = (fast.config.latent_channels, fast.downsample, fast.config.out_channels)
    theirs = (ae.config.latent_channels, ae.downsample, ae.channels)
    if ours != theirs:
        raise ValueError(f"{where}: the fast decoder reads {ours[0]} latent channels and "
                         f"makes {ours[2]}-channel frames {ours[1]}x larger; the "
                         f"autoencoder makes {theirs[0]} latent channels from "
                         f"{theirs[2]}-channel frames {theirs[1]}x larger")
