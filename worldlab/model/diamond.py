"""The peer baseline: a DIAMOND-style world model (Alonso et al. 2024, "Diffusion for World
Modeling") that denoises the next frame in pixel space, conditioned on the last frames and
the action that produced it; no autoencoder, no memory, no camera, no text.

    model = DiamondUNet(**DiamondConfig(size=64).to_kwargs())
    loss = diamond_loss(model, target, context, action, generator)   # training
    frame = sample_next(model, context, action, steps=3, generator=g)  # (b, 3, h, w)

Denoiser (EDM, Karras et al. 2022, table 1). The network F is wrapped so that, with
s = sigma_data,

    D(x; sigma) = c_skip x + c_out F(c_in x, context; c_noise, action)
    c_skip = s^2 / (sigma^2 + s^2)     c_out = sigma s / sqrt(sigma^2 + s^2)
    c_in = 1 / sqrt(sigma^2 + s^2)     c_noise = ln(sigma) / 4

so F's input and its target have unit variance at every noise level. Training draws
ln(sigma) ~ N(p_mean, p_std^2) and weights the denoising error by
lambda = (sigma^2 + s^2) / (sigma s)^2 = 1 / c_out^2, which is the plain MSE of F against
(y - c_skip x) / c_out. Sampling runs a few Euler (or Heun) steps down the EDM schedule
sigma_i = (smax^(1/rho) + i/(n-1) (smin^(1/rho) - smax^(1/rho)))^rho, then sigma_n = 0.
As in DIAMOND, the context frames are noised during training (sigma ~ U(0, context_noise),
its level embedded too), so the model learns to read slightly wrong frames: its own, in an
autoregressive rollout.

U-Net. The noisy frame (3 channels, times c_in) and the context frames (4 x 3 channels) are
stacked, folded 2x2 into channels (`PixelUnshuffle`: no convolution ever runs at full
resolution, the cost that makes a pixel U-Net slow on a CPU) and go down
len(channels) levels of `blocks` residual blocks, through a middle (two blocks around one
self-attention over the coarsest grid), and back up with skips; the last level predicts
2x2 pixels per position. Each residual block is modulated by the conditioning vector
(noise level + action + context noise level) through an adaptive GroupNorm: GN(h) (1 + a)
+ b with (a, b) a linear map of it (zero-initialised: every block starts as plain GN).
With the defaults (channels (48, 96, 128), 2 blocks) it has ~3.8 M parameters.

Shape legend: b batch, c channels, h w height width, a action width, k context frames,
d conditioning width.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

import torch
from diffusers import ConfigMixin, ModelMixin
from diffusers.configuration_utils import register_to_config
from torch import nn
from torch.nn import functional as F

from ..camera import ACTION_WIDTH
from ..config import SOLVERS

# forward, right (metres a step, DOOM walks <= 0.5), yaw, pitch (degrees, DOOM turns
# <= 45): scaled so a typical step is O(1); buttons are 0/1 already
ACTION_SCALE = (2.0, 2.0, 1.0 / 15.0, 1.0 / 15.0) + (1.0,) * (ACTION_WIDTH - 4)

# ----------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiamondConfig:
    size: int = 64  # frame side (h = w) the model was trained at
    context_frames: int = 4  # k: true or generated frames before the one denoised
    action_width: int = ACTION_WIDTH
    channels: tuple[int, ...] = (48, 96, 128)  # per level, at h/2, h/4, h/8 ...
    blocks: int = 2  # residual blocks per level (down and up)
    cond_dim: int = 256  # d
    norm_groups: int = 16
    attention_heads: int = 4  # of the middle self-attention (0: none)
    action_scale: tuple[float, ...] = ACTION_SCALE
    sigma_data: float = 0.5  # EDM: the std of frames in [-1, 1] is about this
    p_mean: float = -0.4  # training ln(sigma) ~ N(p_mean, p_std^2), DIAMOND's values
    p_std: float = 1.2
    sigma_min: float = 2e-3  # sampling schedule, DIAMOND's values
    sigma_max: float = 5.0
    rho: float = 7.0
    context_noise: float = 0.1  # training: context sigma ~ U(0, this); 0 turns it off

    def __post_init__(self):
        object.__setattr__(self, "channels", tuple(int(c) for c in self.channels))
        object.__setattr__(self, "action_scale", tuple(float(v) for v in self.action_scale))
        levels = len(self.channels)
        for name in ("context_frames", "action_width", "blocks", "cond_dim"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"DiamondConfig.{name} must be an int >= 1, got "
                                 f"{getattr(self, name)!r}")
        if levels < 1 or min(self.channels) < 1:
            raise ValueError(f"DiamondConfig.channels must be one or more positive widths, "
                             f"got {self.channels}")
        if self.norm_groups < 1 or any(c % self.norm_groups for c in self.channels):
            raise ValueError(f"DiamondConfig.norm_groups must divide every width of channels "
                             f"{self.channels}, got {self.norm_groups}")
        heads = self.attention_heads
        if heads < 0 or (heads and self.channels[-1] % heads):
            raise ValueError(f"DiamondConfig.attention_heads must be 0 or divide the last "
                             f"width {self.channels[-1]}, got {heads}")
        multiple = 2 ** levels  # one fold, then a halving per level after the first
        if not isinstance(self.size, int) or self.size < multiple or self.size % multiple:
            raise ValueError(f"DiamondConfig.size must be a multiple of {multiple} (2 ^ "
                             f"levels), got {self.size!r}")
        if len(self.action_scale) != self.action_width:
            raise ValueError(f"DiamondConfig.action_scale needs {self.action_width} entries "
                             f"(action_width), got {len(self.action_scale)}")
        for name in ("sigma_data", "p_std", "sigma_min", "sigma_max", "rho"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"DiamondConfig.{name} must be positive and finite, got "
                                 f"{getattr(self, name)!r}")
        if not self.sigma_min < self.sigma_max:
            raise ValueError(f"DiamondConfig.sigma_min ({self.sigma_min}) must be below "
                             f"sigma_max ({self.sigma_max})")
        if not (math.isfinite(self.p_mean) and 0 <= self.context_noise < 1):
            raise ValueError(f"DiamondConfig.p_mean must be finite and context_noise in "
                             f"[0, 1), got {self.p_mean!r}, {self.context_noise!r}")

    def to_kwargs(self) -> dict:
        return asdict(self)


# ----------------------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------------------


def fourier_features(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Scalars (b,) -> sinusoidal features (b, dim), frequencies 1 ... 1000 (geometric)."""
    freqs = torch.exp(torch.linspace(0, math.log(1000.0), dim // 2, device=x.device))
    angles = x.float()[:, None] * freqs  # (b, dim/2)
    return torch.cat([angles.cos(), angles.sin()], dim=1)


class ResBlock(nn.Module):
    """(b, c_in, h, w), cond (b, d) -> (b, c_out, h, w): GN, SiLU, conv, adaptive GN,
    SiLU, conv, plus the (1x1-projected) input."""

    def __init__(self, c_in: int, c_out: int, d: int, groups: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups if c_in % groups == 0 else 1, c_in)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, c_out, affine=False)
        self.modulation = nn.Linear(d, 2 * c_out)  # (scale, shift) of norm2
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.skip = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else nn.Identity()
        nn.init.zeros_(self.modulation.weight)
        nn.init.zeros_(self.modulation.bias)
        nn.init.zeros_(self.conv2.weight)  # a block starts as its skip path

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        scale, shift = self.modulation(cond)[:, :, None, None].chunk(2, dim=1)  # (b, c, 1, 1)
        h = self.conv2(F.silu(self.norm2(h) * (1 + scale) + shift))
        return self.skip(x) + h


class SelfAttention(nn.Module):
    """Multi-head self-attention over the h w positions, residual: (b, c, h, w) -> same."""

    def __init__(self, c: int, heads: int, groups: int):
        super().__init__()
        self.norm, self.heads = nn.GroupNorm(groups, c), heads
        self.qkv, self.proj = nn.Conv2d(c, 3 * c, 1), nn.Conv2d(c, c, 1)
        nn.init.zeros_(self.proj.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, h * w) \
            .transpose(-1, -2).unbind(1)  # each (b, heads, h w, c / heads)
        out = F.scaled_dot_product_attention(q, k, v)  # (b, heads, h w, c / heads)
        return x + self.proj(out.transpose(-1, -2).reshape(b, c, h, w))


# ----------------------------------------------------------------------------------------
# The network and its EDM wrapper
# ----------------------------------------------------------------------------------------


class DiamondUNet(ModelMixin, ConfigMixin):
    """F of the module docstring; `denoise` is D, the preconditioned denoiser. Takes
    every field of `DiamondConfig` as a keyword (validated by it); `cfg` holds it."""

    @register_to_config
    def __init__(self, size: int = 64, context_frames: int = 4,
                 action_width: int = ACTION_WIDTH, channels: tuple[int, ...] = (48, 96, 128),
                 blocks: int = 2, cond_dim: int = 256, norm_groups: int = 16,
                 attention_heads: int = 4, action_scale: tuple[float, ...] = ACTION_SCALE,
                 sigma_data: float = 0.5, p_mean: float = -0.4, p_std: float = 1.2,
                 sigma_min: float = 2e-3, sigma_max: float = 5.0, rho: float = 7.0,
                 context_noise: float = 0.1):
        super().__init__()
        cfg = self.cfg = DiamondConfig(**{k: v for k, v in locals().items()
                                          if k in DiamondConfig.__dataclass_fields__})
        ch, d, g = cfg.channels, cfg.cond_dim, cfg.norm_groups
        self.noise_mlp = nn.Sequential(nn.Linear(d, d), nn.SiLU(), nn.Linear(d, d))
        self.action_mlp = nn.Sequential(nn.Linear(cfg.action_width, d), nn.SiLU(),
                                        nn.Linear(d, d))
        self.fold, self.unfold = nn.PixelUnshuffle(2), nn.PixelShuffle(2)
        self.conv_in = nn.Conv2d(4 * 3 * (1 + cfg.context_frames), ch[0], 3, padding=1)
        self.down = nn.ModuleList()
        for i, c in enumerate(ch):
            c_prev = ch[max(i - 1, 0)]
            self.down.append(nn.ModuleList([ResBlock(c_prev if j == 0 else c, c, d, g)
                                             for j in range(cfg.blocks)]))
        self.mid1, self.mid2 = ResBlock(ch[-1], ch[-1], d, g), ResBlock(ch[-1], ch[-1], d, g)
        self.attn = SelfAttention(ch[-1], cfg.attention_heads, g) if cfg.attention_heads \
            else nn.Identity()
        self.up = nn.ModuleList()
        for i in reversed(range(len(ch))):  # each block reads the matching down skip
            c_next = ch[max(i - 1, 0)]
            self.up.append(nn.ModuleList([ResBlock(ch[i] * 2, ch[i] if j < cfg.blocks - 1
                                                   else c_next, d, g)
                                          for j in range(cfg.blocks)]))
        self.norm_out = nn.GroupNorm(g, ch[0])
        self.conv_out = nn.Conv2d(ch[0], 4 * 3, 3, padding=1)
        nn.init.zeros_(self.conv_out.weight)
        nn.init.zeros_(self.conv_out.bias)

    def conditioning(self, c_noise: torch.Tensor, action: torch.Tensor,
                     context_sigma: torch.Tensor) -> torch.Tensor:
        """(b,), (b, a), (b,) -> the conditioning vector (b, d)."""
        d = self.cfg.cond_dim
        noise = fourier_features(c_noise, d // 2)
        ctx = fourier_features(context_sigma / max(self.cfg.context_noise, 1e-3), d // 2)
        emb = self.noise_mlp(torch.cat([noise, ctx], dim=1).to(self.conv_in.weight.dtype))
        scale = torch.tensor(self.cfg.action_scale, dtype=emb.dtype, device=emb.device)
        return emb + self.action_mlp(action.to(emb.dtype) * scale)

    def forward(self, x_in: torch.Tensor, context: torch.Tensor, c_noise: torch.Tensor,
                action: torch.Tensor, context_sigma: torch.Tensor) -> torch.Tensor:
        """F: scaled noisy frame (b, 3, h, w), context (b, k * 3, h, w), c_noise (b,),
        action (b, a), context noise level (b,) -> (b, 3, h, w)."""
        cond = self.conditioning(c_noise, action, context_sigma)  # (b, d)
        z = self.conv_in(self.fold(torch.cat([x_in, context], dim=1)))  # (b, ch0, h/2, w/2)
        skips = []
        for i, level in enumerate(self.down):
            if i > 0:
                z = F.avg_pool2d(z, 2)
            for block in level:
                z = block(z, cond)
                skips.append(z)
        z = self.mid2(self.attn(self.mid1(z, cond)), cond)
        for i, level in enumerate(self.up):
            if i > 0:
                z = F.interpolate(z, scale_factor=2.0, mode="nearest")
            for block in level:
                z = block(torch.cat([z, skips.pop()], dim=1), cond)
        return self.unfold(self.conv_out(F.silu(self.norm_out(z))))  # (b, 3, h, w)

    def check_inputs(self, x: torch.Tensor, context: torch.Tensor, action: torch.Tensor
                     ) -> None:
        """Shapes of a noisy frame (b, 3, h, w), context (b, k * 3, h, w), action (b, a)."""
        b, k, a, s = x.shape[0], self.cfg.context_frames, self.cfg.action_width, self.cfg.size
        for name, t, want in (("x", x, (b, 3, s, s)), ("context", context, (b, 3 * k, s, s)),
                              ("action", action, (b, a))):
            if tuple(t.shape) != want:
                raise ValueError(f"DiamondUNet: {name} has shape {tuple(t.shape)}; expected "
                                 f"{want} (k={k} context frames, a={a}, size {s})")

    def preconditioning(self, sigma: torch.Tensor):
        """sigma (b,) -> (c_skip, c_out, c_in) as (b, 1, 1, 1), and c_noise (b,)."""
        s2 = self.cfg.sigma_data ** 2
        total = sigma ** 2 + s2
        c_skip, c_out = s2 / total, sigma * self.cfg.sigma_data / total.sqrt()
        c_in = 1 / total.sqrt()
        view = (-1, 1, 1, 1)
        return c_skip.view(view), c_out.view(view), c_in.view(view), sigma.log() / 4

    def denoise(self, x_noisy: torch.Tensor, sigma: torch.Tensor, context: torch.Tensor,
                action: torch.Tensor, context_sigma: torch.Tensor | None = None
                ) -> torch.Tensor:
        """D(x; sigma): the denoised frame (b, 3, h, w) from the noisy one and sigma (b,)
        (or a float), context frames (b, k * 3, h, w) in [-1, 1] and actions (b, a)."""
        self.check_inputs(x_noisy, context, action)
        b = x_noisy.shape[0]
        sigma = torch.as_tensor(sigma, dtype=torch.float32, device=x_noisy.device)
        sigma = sigma.expand(b) if sigma.dim() == 0 else sigma
        if context_sigma is None:
            context_sigma = torch.zeros(b, device=x_noisy.device)
        c_skip, c_out, c_in, c_noise = self.preconditioning(sigma)
        f = self(c_in * x_noisy, context, c_noise, action, context_sigma)
        return c_skip * x_noisy + c_out * f


# ----------------------------------------------------------------------------------------
# Loss and sampler
# ----------------------------------------------------------------------------------------


def diamond_loss(model, target: torch.Tensor, context: torch.Tensor, action: torch.Tensor,
                 generator: torch.Generator) -> torch.Tensor:
    """EDM loss of the next frame `target` (b, 3, h, w) given context (b, k * 3, h, w) and
    actions (b, a): lambda-weighted denoising error = MSE of F against its target. All the
    noise (sigma, the frame's, the context's) comes from `generator` (CPU)."""
    net = getattr(model, "module", model)  # DDP / compiled wrappers keep the config inside
    cfg, b = net.cfg, target.shape[0]
    net.check_inputs(target, context, action)

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(target.device)

    sigma = (cfg.p_mean + cfg.p_std * randn(b)).exp()  # (b,) log-normal
    ctx_sigma = torch.rand(b, generator=generator).to(target.device) * cfg.context_noise
    context = context + ctx_sigma.view(-1, 1, 1, 1) * randn(*context.shape)
    x_noisy = target + sigma.view(-1, 1, 1, 1) * randn(*target.shape)
    c_skip, c_out, c_in, c_noise = net.preconditioning(sigma)
    f = model(c_in * x_noisy, context, c_noise, action, ctx_sigma)
    return F.mse_loss(f, (target - c_skip * x_noisy) / c_out)


def edm_sigmas(cfg: DiamondConfig, steps: int) -> torch.Tensor:
    """The sampling schedule (steps + 1,) float64: sigma_max down to sigma_min (rho
    spacing), then 0."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    ramp = torch.linspace(0, 1, steps, dtype=torch.float64) if steps > 1 else \
        torch.zeros(1, dtype=torch.float64)
    lo, hi = cfg.sigma_min ** (1 / cfg.rho), cfg.sigma_max ** (1 / cfg.rho)
    return torch.cat([(hi + ramp * (lo - hi)) ** cfg.rho, ramp.new_zeros(1)])


@torch.no_grad()
def sample_next(model: DiamondUNet, context: torch.Tensor, action: torch.Tensor,
                steps: int = 3, generator: torch.Generator | None = None,
                solver: str = "euler") -> torch.Tensor:
    """The next frame (b, 3, h, w) in [-1, 1] after context frames (b, k * 3, h, w) under
    actions (b, a): `steps` Euler (or Heun) steps of the probability-flow ODE from
    sigma_max; the initial noise comes from `generator` (CPU; default torch's global)."""
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {SOLVERS}")
    b, s = context.shape[0], model.cfg.size
    sigmas = edm_sigmas(model.cfg, steps).tolist()
    dtype = next(model.parameters()).dtype
    x = torch.randn(b, 3, s, s, generator=generator).to(context.device, dtype) * sigmas[0]
    for sigma, nxt in itertools.pairwise(sigmas):
        slope = (x - model.denoise(x, sigma, context, action)) / sigma  # dx / dsigma
        x_next = x + (nxt - sigma) * slope
        if solver == "heun" and nxt > 0:  # trapezoid: average with the slope at the end
            slope_next = (x_next - model.denoise(x_next, nxt, context, action)) / nxt
            x_next = x + (nxt - sigma) * 0.5 * (slope + slope_next)
        x = x_next
    return x.clamp(-1, 1)
