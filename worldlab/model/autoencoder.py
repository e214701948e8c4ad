"""The video autoencoder: frames <-> latents, one frame at a time.

A diffusers `AutoencoderKL` configured small: per-frame 2-D convolutions, one 2x
down-sampling per block but the last, so the 4 blocks of every preset compress 8x in space
(3 blocks would give only 4x). No temporal compression: latent frame i is video frame i,
which keeps chunks, actions and poses aligned one to one.

RGB only by default. With `depth_channel=True` the encoder reads a fourth channel, depth as
clipped inverse depth (`depth_to_channel`): near objects get the resolution, `inf` (sky,
nothing hit) maps to -1 exactly and back to `inf`. The world model then generates RGB-D and
the 3D cache can be fed from its own output.

Latents are normalised to about unit variance, `(z - shift_factor) * scaling_factor`, with
the two numbers stored in the model config and measured on data after training
(`fit_latent_scale`), as in Stable Diffusion 3 / Flux.

Shape legend: b batch, t time (frames), c channels, h w height width.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import torch
from diffusers import AutoencoderKL, ConfigMixin, ModelMixin
from diffusers.configuration_utils import register_to_config

from ..config import AutoencoderConfig
from ..metrics import colour_distance, psnr, sharpness_ratio, ssim

DEPTH_NEAR_M = 0.25  # inverse depth saturates closer than this (the eye is 1.54 m up in DOOM)

# ----------------------------------------------------------------------------------------
# Frames <-> model tensors
# ----------------------------------------------------------------------------------------


def frames_to_tensor(rgb, depth=None) -> torch.Tensor:
    """uint8 (..., h, w, 3) [+ metric depth (..., h, w)] -> float32 (..., c, h, w) in [-1, 1]."""
    rgb = torch.as_tensor(np.asarray(rgb))
    if rgb.dtype != torch.uint8 or rgb.dim() < 3 or rgb.shape[-1] != 3:
        raise ValueError(f"frames must be uint8 (..., h, w, 3), got {rgb.dtype} "
                         f"{tuple(rgb.shape)}")
    x = rgb.movedim(-1, -3).float() / 127.5 - 1.0  # (..., 3, h, w)
    if depth is None:
        return x
    return torch.cat([x, depth_to_channel(depth)], dim=-3)  # (..., 4, h, w)


def tensor_to_frames(x: torch.Tensor) -> np.ndarray:
    """float (..., c, h, w) in [-1, 1] -> uint8 (..., h, w, 3) of the RGB channels."""
    if x.dim() < 3 or x.shape[-3] not in (3, 4):
        raise ValueError(f"expected (..., 3 or 4, h, w), got {tuple(x.shape)}")
    rgb = ((x[..., :3, :, :].detach().float().cpu() + 1.0) * 127.5).round().clamp(0, 255)
    return rgb.to(torch.uint8).movedim(-3, -1).numpy()


def depth_to_channel(depth) -> torch.Tensor:
    """Metric z-depth (..., h, w), `inf` allowed -> (..., 1, h, w) in [-1, 1] (inverse depth)."""
    d = torch.as_tensor(np.asarray(depth, dtype=np.float32))
    if torch.isnan(d).any() or (d <= 0).any():
        raise ValueError("depth must be positive (inf allowed) and not NaN, got min "
                         f"{float(torch.nan_to_num(d, nan=-1.0).min())}")
    inv = (DEPTH_NEAR_M / d).clamp(max=1.0)  # inf -> 0
    return (2.0 * inv - 1.0).unsqueeze(-3)


def channel_to_depth(ch: torch.Tensor) -> torch.Tensor:
    """Inverse of `depth_to_channel`: (..., 1, h, w) -> metric depth (..., h, w), -1 -> inf."""
    inv = ((ch.squeeze(-3).float() + 1.0) / 2.0).clamp(min=0.0)
    return DEPTH_NEAR_M / inv  # 0 -> inf


# ----------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------


class VideoAutoencoder(ModelMixin, ConfigMixin):
    """Per-frame KL autoencoder: (b, t, c, h, w) in [-1, 1] <-> (b, t, c', h/8, w/8)."""

    @register_to_config
    def __init__(self, block_out_channels: tuple[int, ...] = (32, 64, 128, 128),
                 layers_per_block: int = 1, latent_channels: int = 8,
                 norm_num_groups: int = 16, depth_channel: bool = False,
                 scaling_factor: float = 1.0, shift_factor: float = 0.0):
        super().__init__()
        n = len(block_out_channels)
        channels = 4 if depth_channel else 3
        self.vae = AutoencoderKL(
            in_channels=channels, out_channels=channels,
            down_block_types=("DownEncoderBlock2D",) * n,
            up_block_types=("UpDecoderBlock2D",) * n,
            block_out_channels=tuple(block_out_channels), layers_per_block=layers_per_block,
            latent_channels=latent_channels, norm_num_groups=norm_num_groups)

    @classmethod
    def from_config_dataclass(cls, cfg: AutoencoderConfig) -> "VideoAutoencoder":
        return cls(block_out_channels=tuple(cfg.block_out_channels),
                   layers_per_block=cfg.layers_per_block, latent_channels=cfg.latent_channels,
                   norm_num_groups=cfg.norm_num_groups, depth_channel=cfg.depth_channel)

    @property
    def channels(self) -> int:
        return 4 if self.config.depth_channel else 3

    @property
    def downsample(self) -> int:
        return 2 ** (len(self.config.block_out_channels) - 1)

    def _check_frames(self, x: torch.Tensor, ndim: int) -> None:
        f = self.downsample
        if (x.dim() != ndim or x.shape[-3] != self.channels or x.shape[-1] % f
                or x.shape[-2] % f):
            lead = "(b, t, " if ndim == 5 else "("
            raise ValueError(f"expected frames {lead}{self.channels}, h, w) with h and w "
                             f"divisible by {f}, got {tuple(x.shape)}")

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None):
        """Training pass on single frames (b, c, h, w): sampled latent -> (recon, kl (b,))."""
        self._check_frames(x, 4)
        post = self.vae.encode(x).latent_dist
        eps = torch.randn(post.mean.shape, generator=generator).to(x.device, post.mean.dtype)
        z = post.mean + post.std * eps  # reparameterised sample, (b, c', h/8, w/8)
        return self.vae.decode(z).sample, post.kl()

    @torch.no_grad()
    def encode(self, frames: torch.Tensor) -> torch.Tensor:
        """(b, t, c, h, w) in [-1, 1] -> normalised latents (b, t, c', h/8, w/8).

        Uses the posterior mode, so caching latents is deterministic.
        """
        self._check_frames(frames, 5)
        b, t = frames.shape[:2]
        x = frames.flatten(0, 1).to(self.device, self.dtype)  # (b*t, c, h, w)
        z = self.vae.encode(x).latent_dist.mode()
        z = (z - self.config.shift_factor) * self.config.scaling_factor
        return z.unflatten(0, (b, t))

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Normalised latents (b, t, c', h', w') -> frames (b, t, c, 8h', 8w') in [-1, 1]."""
        b, t = latents.shape[:2]
        z = flat_latents(self, latents)
        z = z / self.config.scaling_factor + self.config.shift_factor
        return self.vae.decode(z).sample.clamp(-1, 1).unflatten(0, (b, t))


def flat_latents(decoder, latents: torch.Tensor) -> torch.Tensor:
    """Latents (b, t, c', h', w') checked against a decoder's `latent_channels` -> frames
    of latents (b t, c', h', w') on its device and dtype."""
    if latents.dim() != 5 or latents.shape[2] != decoder.config.latent_channels:
        raise ValueError(f"expected latents (b, t, {decoder.config.latent_channels}, h, w), "
                         f"got {tuple(latents.shape)}")
    return latents.flatten(0, 1).to(decoder.device, decoder.dtype)


# ----------------------------------------------------------------------------------------
# Latent statistics and held-out scores (training itself: `worldlab.train`)
# ----------------------------------------------------------------------------------------


def _batches(x: torch.Tensor, batch: int):
    for i in range(0, len(x), batch):
        yield x[i:i + batch]


@torch.no_grad()
def fit_latent_scale(ae: VideoAutoencoder, frames: torch.Tensor, batch: int = 64) -> tuple:
    """Measure mean/std of the raw latents of frames (n, c, h, w); store them in the config.

    Returns (shift_factor, scaling_factor): afterwards `encode` gives latents with mean 0 and
    standard deviation 1 on these frames.
    """
    ae.register_to_config(shift_factor=0.0, scaling_factor=1.0)
    z = torch.cat([ae.encode(x[:, None]).float().cpu() for x in _batches(frames, batch)])
    shift, scale = float(z.mean()), float(1.0 / z.std())
    ae.register_to_config(shift_factor=shift, scaling_factor=scale)
    return shift, scale


class Resampling:
    """The reference a learned autoencoder at `downsample`x compression is measured against:
    each frame averaged over downsample x downsample pixels and upsampled again (bicubic),
    nothing learned. It has `VideoAutoencoder`'s encode and decode on (b, t, c, h, w), so
    `evaluate_autoencoder` scores it the same way; its latent keeps every channel (3 numbers
    per latent pixel, against the learned ones' `latent_channels`).
    """

    def __init__(self, downsample: int):
        if isinstance(downsample, bool) or not isinstance(downsample, int) or downsample < 2:
            raise ValueError(f"Resampling needs an int downsample >= 2, got {downsample!r}")
        self.downsample = downsample

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c, h, w = x.shape
        if h % self.downsample or w % self.downsample:
            raise ValueError(f"frames of {h}x{w} pixels do not split into "
                             f"{self.downsample}x{self.downsample} blocks")
        z = torch.nn.functional.avg_pool2d(x.flatten(0, 1).float(), self.downsample)
        return z.unflatten(0, (b, t))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        up = torch.nn.functional.interpolate(z.flatten(0, 1), scale_factor=self.downsample,
                                             mode="bicubic", align_corners=False)
        return up.clamp(-1.0, 1.0).unflatten(0, z.shape[:2])


@torch.no_grad()
def reconstruct(ae: VideoAutoencoder, frames: torch.Tensor) -> torch.Tensor:
    """`ae`'s float CPU reconstruction (n, c, h, w) of frames (n, c, h, w), each frame alone."""
    return ae.decode(ae.encode(frames[:, None]))[:, 0].float().cpu()


@torch.no_grad()
def evaluate_autoencoder(ae: VideoAutoencoder, frames: torch.Tensor,
                         batch: int = 64) -> dict[str, float]:
    """Held-out scores of reconstructing frames (n, c, h, w), on their RGB channels (any `ae`
    with `VideoAutoencoder`'s encode and decode: also `Resampling`).

    psnr (dB) and ssim: the mean per frame. sharpness_ratio: how much fine detail survives,
    the reconstructions' mean Laplacian variance over the frames' (1 = as sharp; a blurry
    autoencoder scores well below 1). colour_distance: the reconstructions' colour
    histograms against the frames', in [0, 1] (0 = the same palette). Both on the uint8
    frames a player would see (`metrics.sharpness_ratio`, `metrics.colour_distance`).
    """
    ps, ss, seen = [], [], []
    for x in _batches(frames, batch):
        y = reconstruct(ae, x)
        ps.append(psnr(y[:, :3], x[:, :3]))
        ss.append(ssim(y[:, :3], x[:, :3]))
        seen.append(tensor_to_frames(y))  # (b, h, w, 3) uint8
    pred, true = np.concatenate(seen), tensor_to_frames(frames)
    return {"psnr": float(torch.cat(ps).mean()), "ssim": float(torch.cat(ss).mean()),
            "sharpness_ratio": sharpness_ratio(pred, true),
            "colour_distance": colour_distance(pred, true)}


def tokens_per_frame(height: int, width: int, downsample: int, patch_size: int) -> int:
    """Transformer tokens per frame: latent patches of a (height, width) frame compressed
    `downsample`x in space (`VideoAutoencoder.downsample`) and cut in patch_size^2 patches.

    The cost of spatial compression, for 64x64 frames (attention cost grows as tokens^2):

        blocks  downsample  latent   patch 1  patch 2
        4       8x          8x8      64       16
        3       4x          16x16    256      64

    so a 4x autoencoder with patch 2 gives the world model as many tokens as today's 8x
    one with patch 1, each covering the same 8x8 pixels, from a latent with 4x the values.
    """
    side = downsample * patch_size
    if min(height, width, downsample, patch_size) < 1 or height % side or width % side:
        raise ValueError(f"a {height}x{width} frame does not split into {side}x{side}-pixel "
                         f"tokens (downsample {downsample} x patch_size {patch_size})")
    return (height // side) * (width // side)


def without_lowest_level(tensors: dict[str, torch.Tensor], blocks: int
                         ) -> dict[str, torch.Tensor]:
    """The weights of an autoencoder of `blocks` levels (e.g. 4: 8x) for one of `blocks - 1`
    levels (3: 4x), whose block_out_channels are the first `blocks - 1` of the bigger one's
    (the last two of which must be equal): every weight but the lowest-resolution level's.

    Encoder: the last kept block stops down-sampling and the lowest one goes. Decoder:
    up_blocks[0] (lowest resolution) goes and up_blocks[k + 1] becomes up_blocks[k]. So a
    4x autoencoder can start from a trained 8x one rather than from noise.
    """
    enc, dec = "vae.encoder.down_blocks.", "vae.decoder.up_blocks."
    out = {}
    for key, value in tensors.items():
        if key.startswith(enc):
            level, rest = key[len(enc):].split(".", 1)
            if int(level) == blocks - 1 or (int(level) == blocks - 2
                                            and rest.startswith("downsamplers")):
                continue
        elif key.startswith(dec):
            level, rest = key[len(dec):].split(".", 1)
            if int(level) == 0:
                continue
            key = f"{dec}{int(level) - 1}.{rest}"
        out[key] = value
    return out


def with_more_latent_channels(fresh: dict[str, torch.Tensor],
                              trained: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The weights of a trained autoencoder for one of the same levels with more latent
    channels, whose initial weights are `fresh`: it decodes exactly what the trained one
    does, and the new channels learn what the trained ones missed.

    Every tensor away from the latent is the trained one. The encoder's output (conv_out:
    means, then log-variances) keeps the trained rows and the fresh ones for the new
    channels; quant_conv and post_quant_conv keep the trained block and pass the new means
    through (identity). The new log-variances copy the trained ones (cycled), so the new
    channels are as nearly deterministic as the trained channels chose to be. The decoder
    reads the new channels with weight 0, as LoRA's zero half: its gradient there is not 0,
    since their encoding is not.
    """
    c, n = (t["vae.post_quant_conv.weight"].shape[0] for t in (trained, fresh))
    if n <= c:
        raise ValueError(f"with_more_latent_channels widens {c} latent channels, got {n}")
    old = torch.cat([torch.arange(c), n + torch.arange(c)])  # trained moments' new rows
    out = dict(trained)
    for part in ("weight", "bias"):
        key = f"vae.encoder.conv_out.{part}"
        out[key] = fresh[key].clone()
        out[key][old] = trained[key]
    for key, size, rows in (("vae.quant_conv", 2 * n, old), ("vae.post_quant_conv", n,
                                                               torch.arange(c))):
        w = torch.eye(size).reshape(size, size, 1, 1)
        w[rows] = 0.0
        w[rows.unsqueeze(1), rows] = trained[f"{key}.weight"]
        bias = torch.zeros(size)
        bias[rows] = trained[f"{key}.bias"]
        out[f"{key}.weight"], out[f"{key}.bias"] = w, bias
    new_var, copied = n + torch.arange(c, n), c + torch.arange(n - c) % c
    out["vae.quant_conv.weight"][new_var] = 0.0
    out["vae.quant_conv.weight"][new_var.unsqueeze(1), old] = (
        trained["vae.quant_conv.weight"][copied])
    out["vae.quant_conv.bias"][new_var] = trained["vae.quant_conv.bias"][copied]
    w = torch.zeros_like(fresh["vae.decoder.conv_in.weight"])
    w[:, :c] = trained["vae.decoder.conv_in.weight"]
    out["vae.decoder.conv_in.weight"] = w
    return out


# ----------------------------------------------------------------------------------------
# Filling the latent cache
# ----------------------------------------------------------------------------------------


@torch.no_grad()
def encode_store(ae: VideoAutoencoder, store, cache, batch: int = 64,
                 callbacks: Iterable[Callable] = ()) -> int:
    """Encode every episode of `store` missing from `cache` (float16 latents); returns the count.

    Callbacks receive dict(episode=id, frames=t) after each episode is written.
    """
    done = 0
    for eid in store.ids():
        if cache.has(eid):
            continue
        ep = store.read(eid)
        depth = ep.depth if ae.config.depth_channel else None
        x = frames_to_tensor(ep.rgb, depth)  # (t, c, h, w)
        z = torch.cat([ae.encode(xb[None])[0].cpu() for xb in _batches(x, batch)])
        cache.put(eid, z.to(torch.float16).numpy())  # (t, c', h/8, w/8)
        done += 1
        for cb in callbacks:
            cb({"episode": eid, "frames": len(x)})
    return done
