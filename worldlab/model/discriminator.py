"""The adversarial critic of the autoencoder: a PatchGAN, and the pair that `fit` trains.

An L1/MSE autoencoder averages what it cannot place exactly, so DOOM's textures come back
smooth (a quarter of the engine's Laplacian variance). A patch discriminator scores every
overlapping patch of a frame real or reconstructed; the autoencoder's decoder, trained to
fool it, must put texture back (pix2pix; taming-transformers' VQGAN and the latent-diffusion
autoencoders do the same).

`PatchDiscriminator` is the pix2pix / taming `NLayerDiscriminator`: `layers` 4x4 stride-2
convolutions doubling the width (up to 8x `channels`), one 4x4 stride-1 convolution, then a
4x4 convolution to one logit per patch. GroupNorm, not BatchNorm: a critic's batch holds real
and fake frames together, and batch statistics would let it tell them apart by the batch
(at narrow widths the groups are single channels, i.e. instance norm, as CycleGAN's PatchGAN).
At `small` (channels 32, layers 3) it has 0.69 M parameters; each logit sees 70x70 pixels.

`AutoencoderWithCritic` holds the autoencoder and the discriminator as one module so the one
optimizer of `fit` trains both; how its loss keeps the two gradients apart is in its
docstring and in `train/losses.py:autoencoder_gan_loss`.

Shape legend: b batch, c channels, h w height width.
"""

from __future__ import annotations

import math

import torch
from diffusers import ConfigMixin, ModelMixin
from diffusers.configuration_utils import register_to_config
from torch import nn
from torch.func import functional_call

from ..config import AutoencoderConfig
from .autoencoder import VideoAutoencoder


def _norm(c: int) -> nn.GroupNorm:
    return nn.GroupNorm(math.gcd(c, 32), c)  # up to 32 groups, as diffusers' blocks


class PatchDiscriminator(ModelMixin, ConfigMixin):
    """PatchGAN: frames (b, c, h, w) in [-1, 1] -> logits (b, 1, h / 2^layers - 2, w / ...)."""

    @register_to_config
    def __init__(self, in_channels: int = 3, channels: int = 32, layers: int = 3):
        super().__init__()
        if in_channels < 1 or channels < 1 or layers < 1:
            raise ValueError(f"PatchDiscriminator needs in_channels, channels and layers >= 1, "
                             f"got {in_channels}, {channels}, {layers}")
        # the first layer has no norm (pix2pix): it would wash out the input's own contrast
        blocks: list[nn.Module] = [nn.Conv2d(in_channels, channels, 4, 2, 1),
                                   nn.LeakyReLU(0.2)]
        c = channels
        for i in range(1, layers + 1):
            wide = channels * min(2 ** i, 8)
            stride = 2 if i < layers else 1  # the last widening keeps the resolution
            blocks += [nn.Conv2d(c, wide, 4, stride, 1, bias=False), _norm(wide),
                       nn.LeakyReLU(0.2)]
            c = wide
        blocks.append(nn.Conv2d(c, 1, 4, 1, 1))  # one logit per patch
        self.net = nn.Sequential(*blocks)
        for m in self.modules():  # N(0, 0.02) as pix2pix and taming: small first logits
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, 0.0, 0.02)

    @classmethod
    def from_config_dataclass(cls, cfg: AutoencoderConfig) -> "PatchDiscriminator":
        """The critic of the autoencoder that `cfg` builds (it reads the same channels)."""
        return cls(in_channels=4 if cfg.depth_channel else 3, channels=cfg.disc_channels,
                   layers=cfg.disc_layers)

    @property
    def min_size(self) -> int:
        """The smallest frame side that leaves one patch: 3 * 2^layers."""
        return 3 * 2 ** self.config.layers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Frames (b, c, h, w) -> patch logits (b, 1, h', w'); > 0 means 'looks real'."""
        if (x.dim() != 4 or x.shape[1] != self.config.in_channels
                or min(x.shape[-2:]) < self.min_size):
            raise ValueError(f"expected frames (b, {self.config.in_channels}, h, w) with h and "
                             f"w >= {self.min_size}, got {tuple(x.shape)}")
        return self.net(x)


def _public_config(model: ConfigMixin) -> dict:
    """A model's constructor arguments as JSON values (diffusers bookkeeping left out)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in model.config.items()
            if not k.startswith("_")}


class AutoencoderWithCritic(ModelMixin, ConfigMixin):
    """The autoencoder and its discriminator as one module, so `fit` (one model, one AdamW
    over all its parameters, one `loss_fn`) trains a GAN unchanged.

    One backward pass of the summed loss `L_rec + w * L_G + L_D` gives each network the
    gradient of its own objective, because each term reaches only one of them:
      - L_D (hinge) scores the real frames and the *detached* reconstructions: it has no
        path to the autoencoder, so it moves only the discriminator;
      - L_G (-mean D(recon)) runs the reconstruction through a frozen view of the
        discriminator (`torch.func.functional_call` with its parameters detached): the
        gradient flows through D's activations into the decoder, and none into D's weights;
      - L_rec is the autoencoder's own loss.
    So the AdamW step is two simultaneous updates, D on L_D and the autoencoder on
    L_rec + w * L_G; they share only the learning rate and fit's global gradient clipping.

    `step` (an int64 buffer, saved in checkpoints) counts training passes: `fit` makes one a
    step, so the loss reads the step from it to start the adversarial term after the
    warm-up, and a resumed run continues the count. The pair's config records both parts'
    configs; it is saved only inside training checkpoints (`fit` resumes it with
    `load_checkpoint` into a pair built the same way). The parts are saved on their own for
    use: `autoencoder` as any VideoAutoencoder, `discriminator` as a PatchDiscriminator.
    """

    def __init__(self, autoencoder: VideoAutoencoder, discriminator: PatchDiscriminator):
        super().__init__()
        if discriminator.config.in_channels != autoencoder.channels:
            raise ValueError(f"the discriminator reads {discriminator.config.in_channels} "
                             f"channels but the autoencoder makes {autoencoder.channels}")
        self.autoencoder, self.discriminator = autoencoder, discriminator
        self.register_buffer("step", torch.zeros((), dtype=torch.int64))
        # config names differ from the module names: diffusers looks config fields up first
        self.register_to_config(autoencoder_config=_public_config(autoencoder),
                                discriminator_config=_public_config(discriminator))

    @property
    def last_layer(self) -> torch.Tensor:
        """The decoder's output convolution weight, where the adaptive GAN weight compares
        gradient norms (latent-diffusion, taming)."""
        return self.autoencoder.vae.decoder.conv_out.weight

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None,
                adversarial: bool = False) -> dict[str, torch.Tensor]:
        """Training pass on frames (b, c, h, w): a dict of
            recon (b, c, h, w), kl (b,)   the autoencoder's pass (a sampled latent);
            real, fake (b, 1, h', w')     D's logits on x and on the detached recon;
            gen (b, 1, h', w')            frozen D's logits on recon, only if `adversarial`.
        Counts the pass in `step` when in training mode.
        """
        recon, kl = self.autoencoder(x, generator=generator)
        # one D call on real and fake together: GroupNorm is per frame, so nothing mixes
        real, fake = self.discriminator(torch.cat([x, recon.detach()])).chunk(2)
        out = {"recon": recon, "kl": kl, "real": real, "fake": fake}
        if adversarial:
            frozen = {n: p.detach() for n, p in self.discriminator.named_parameters()}
            out["gen"] = functional_call(self.discriminator, frozen, (recon,))
        if self.training:
            self.step += 1
        return out
