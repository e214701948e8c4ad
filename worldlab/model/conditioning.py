"""What drives the world model besides the noisy latents: time, camera, actions, text.

Every signal becomes a width-d vector that the transformer reads in one of two ways:

- per frame, through AdaLN modulation: flow-matching time (one per chunk, so diffusion
  forcing can give each chunk its own noise level), the camera's relative pose and the
  player's action;
- per chunk, through cross-attention: the structured caption (scene / character / event),
  with a learned null caption for dropped or absent text (classifier-free guidance).

The validators at the bottom check the raw inputs once, at the model's boundary, and name
the bad value and what was expected.

Shape legend: b batch, t frames, n chunks, d width, a action width, k text tokens,
e text dim.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ..camera import BUTTONS

N_CONTINUOUS = 4  # forward, right, yaw, pitch: the continuous head of camera.ACTION_FIELDS
POSE_FEATURES = 6  # translation (3) + axis-angle rotation (3)

# ----------------------------------------------------------------------------------------
# Relative pose features
# ----------------------------------------------------------------------------------------


def rotation_to_axis_angle(R: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (..., 3, 3) -> axis-angle vectors (..., 3), angle in radians.

    Uses w = vee(R - R^T) / 2 = sin(theta) * axis and theta = atan2(|w|, (tr R - 1) / 2),
    which stays accurate for small angles (the common case: a player turns a few degrees
    per frame). Angles close to pi lose precision; a player turns at most 90 degrees a step.
    """
    w = 0.5 * torch.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0],
                           R[..., 1, 0] - R[..., 0, 1]], dim=-1)  # (..., 3)
    sin = w.norm(dim=-1, keepdim=True)
    cos = 0.5 * (R.diagonal(dim1=-2, dim2=-1).sum(-1, keepdim=True) - 1)
    theta = torch.atan2(sin, cos)
    # theta / sin(theta) -> 1 as theta -> 0; avoid 0 / 0 there
    factor = torch.where(sin > 1e-12, theta / sin.clamp_min(1e-12), torch.ones_like(sin))
    return w * factor


def relative_pose_features(c2w: torch.Tensor, previous: torch.Tensor | None = None
                           ) -> torch.Tensor:
    """Absolute poses (b, t, 4, 4) -> per-frame 6-DoF deltas (b, t, 6), float64.

    Frame i gets the pose of camera i in the frame of camera i - 1 (inv(c2w[i-1]) @ c2w[i]):
    its translation (metres, in the previous camera's axes) and its rotation as axis-angle
    (radians). The first frame is compared with `previous` (b, 4, 4), the pose just before
    the clip (a streaming session keeps it), or gets zeros when there is none.
    """
    c2w = c2w.double()
    if previous is None:
        prev = torch.cat([c2w[:, :1], c2w[:, :-1]], dim=1)  # first frame relative to itself
    else:
        prev = torch.cat([previous.double()[:, None], c2w[:, :-1]], dim=1)  # (b, t, 4, 4)
    R_prev_T = prev[..., :3, :3].transpose(-1, -2)
    R_rel = R_prev_T @ c2w[..., :3, :3]  # (b, t, 3, 3)
    t_rel = (R_prev_T @ (c2w[..., :3, 3] - prev[..., :3, 3])[..., None])[..., 0]  # (b, t, 3)
    feats = torch.cat([t_rel, rotation_to_axis_angle(R_rel)], dim=-1)  # (b, t, 6)
    if previous is None:
        feats[:, 0] = 0.0  # exactly zero, not rounding noise from R^T R
    return feats


# ----------------------------------------------------------------------------------------
# Embedders: each maps one signal to (..., d)
# ----------------------------------------------------------------------------------------


def _mlp(d_in: int, d: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d), nn.SiLU(), nn.Linear(d, d))


class TimestepEmbedder(nn.Module):
    """Flow time in [0, 1] (...,) -> (..., d) via sinusoids and an MLP (as in DiT)."""

    def __init__(self, d: int, freq_dim: int = 256):
        super().__init__()
        self.freq_dim = freq_dim
        self.mlp = _mlp(freq_dim, d)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.freq_dim // 2
        freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, device=t.device) / half)
        # x1000 so that t in [0, 1] spans the same phases as DiT's integer timesteps
        args = 1000.0 * t.float()[..., None] * freqs  # (..., half)
        emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        return self.mlp(emb.to(self.mlp[0].weight.dtype))


class PoseEmbedder(nn.Module):
    """Relative pose features (b, t, 6) -> (b, t, d)."""

    def __init__(self, d: int):
        super().__init__()
        self.mlp = _mlp(POSE_FEATURES, d)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.mlp(feats.to(self.mlp[0].weight.dtype))


class ActionEmbedder(nn.Module):
    """Canonical action vectors (b, t, a) -> (b, t, d).

    The continuous deltas (forward, right, yaw, pitch) go through an MLP; every button has
    its own pair of (released, held) embeddings, summed, so a button is a discrete token
    rather than a number the MLP must threshold.
    """

    def __init__(self, d: int, action_width: int):
        super().__init__()
        self.n_buttons = action_width - N_CONTINUOUS
        self.continuous = _mlp(N_CONTINUOUS, d)
        self.buttons = nn.Parameter(torch.randn(max(self.n_buttons, 0), 2, d) * 0.02)

    def forward(self, actions: torch.Tensor) -> torch.Tensor:
        emb = self.continuous(actions[..., :N_CONTINUOUS].to(self.buttons.dtype))  # (b, t, d)
        held = actions[..., N_CONTINUOUS:].round().long()  # (b, t, buttons) in {0, 1}
        for i in range(self.n_buttons):
            emb = emb + self.buttons[i][held[..., i]]
        return emb


class TextEmbedder(nn.Module):
    """Caption embeddings (b, n, k, e) -> cross-attention context (b, n, k, d).

    A learned null caption (k, e) replaces the chunks whose text is absent (`text=None`) or
    dropped (`drop` (b, n) True): the model learns one "no prompt" input that classifier-free
    guidance contrasts with.
    """

    def __init__(self, d: int, text_dim: int, text_tokens: int):
        super().__init__()
        self.null = nn.Parameter(torch.randn(text_tokens, text_dim) * 0.02)  # (k, e)
        self.proj = nn.Linear(text_dim, d)

    def forward(self, text: torch.Tensor | None, drop: torch.Tensor | None, b: int, n: int
                ) -> torch.Tensor:
        null = self.null.expand(b, n, *self.null.shape)  # (b, n, k, e)
        if text is None:
            text = null
        elif drop is not None:
            text = torch.where(drop[..., None, None], null, text.to(null.dtype))
        return self.proj(text.to(null.dtype))  # (b, n, k, d)


# ----------------------------------------------------------------------------------------
# Validation of the conditioning inputs (b and t come from the latents)
# ----------------------------------------------------------------------------------------


def checking_values() -> bool:
    """Whether to check values (finite, in range), which reads tensors back to Python: not
    while torch.compile traces, where each check would split the graph and stall the GPU
    every step. Eager runs check them; shapes are checked always."""
    return not torch.compiler.is_compiling()


def check_tensor(name: str, x, shape: tuple, expected: str) -> torch.Tensor:
    """`x` itself if it is a tensor of `shape` (and finite, in eager runs); else ValueError
    naming `name` and `expected`. Public: the transformer and the memory tokens check their
    inputs through it too."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor {expected}, got {type(x).__name__}")
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(x.shape)}; expected {expected} = "
                         f"{tuple(shape)}")
    if checking_values() and x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite; got non-finite values "
                         f"{x[~torch.isfinite(x)][:3].tolist()}")
    return x


def check_time(t, shape: tuple, expected: str = "(b, n) flow time per chunk") -> torch.Tensor:
    """Flow time in [0, 1]: one noise level per chunk."""
    check_tensor("t", t, shape, expected)
    if checking_values() and bool((t < 0).any() | (t > 1).any()):
        raise ValueError(f"t must lie in [0, 1] (0 clean, 1 noise); got min {t.min().item()}, "
                         f"max {t.max().item()}")
    return t


def check_actions(actions, b: int, t: int, width: int) -> torch.Tensor:
    """Canonical action vectors (b, t, a); buttons (the last a - 4 entries) must be 0 or 1."""
    check_tensor("actions", actions, (b, t, width),
                  f"(b, t, a) with action width a={width} (fields forward, right, yaw, pitch, "
                  f"{', '.join(BUTTONS)})")
    held = actions[..., N_CONTINUOUS:]
    if checking_values() and bool(((held != 0) & (held != 1)).any()):
        raise ValueError(f"actions buttons (entries {N_CONTINUOUS}..{width - 1}) must be 0 or 1; "
                         f"got {held[(held != 0) & (held != 1)][:3].tolist()}")
    return actions


def check_pose_tensor(c2w, b: int, t: int) -> torch.Tensor:
    """Absolute camera-to-world poses (b, t, 4, 4), finite."""
    return check_tensor("c2w", c2w, (b, t, 4, 4), "(b, t, 4, 4) camera-to-world poses")


def check_text(text, drop, b: int, n: int, k: int, e: int):
    """Caption embeddings (b, n, k, e) or None; drop mask (b, n) bool or None."""
    if text is not None:
        check_tensor("text", text, (b, n, k, e),
                      f"(b, n, k, e) caption embeddings with k={k} tokens of dim e={e}")
    if drop is not None:
        check_tensor("text_drop", drop, (b, n), "(b, n) boolean drop mask")
        if drop.dtype != torch.bool:
            raise ValueError(f"text_drop must be a bool tensor (b, n); got dtype {drop.dtype}")
    return text, drop
