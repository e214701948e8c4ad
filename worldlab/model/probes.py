"""Probes: small networks trained on engine frames with the engine's own labels, that then
read generated frames (`worldlab.evaluate.events`, `worldlab.evaluate.camera_follow`).

    task "kinds"   one frame (b, 3, h, w) -> a logit per character kind (b, K): is a
                   character of that kind in view (`train.probes.kind_labels`)
    task "motion"  two frames `gap` apart, stacked (b, 6, h, w) -> the camera's motion
                   between them (b, 4): forward and strafe metres, yaw and pitch degrees
                   (`train.probes.relative_motion`), each divided by `scale`

The network is a plain strided CNN: four (3x3 conv stride 2, GroupNorm, SiLU) levels, so a
64 px frame ends at 4 x 4; "kinds" pools that map by its mean and its max (a character may
be anywhere, and a small one lights few positions), "motion" keeps its layout (which way
the scene moved is the answer) and flattens it into a small MLP. With the default channels
(32, 64, 96, 128) a probe has ~0.2-0.4 M parameters.

Shape legend: b batch, c channels, h w height width, K kinds.
"""

from __future__ import annotations

import numpy as np
import torch
from diffusers import ConfigMixin, ModelMixin
from diffusers.configuration_utils import register_to_config
from torch import nn

from .autoencoder import frames_to_tensor

TASKS = ("kinds", "motion")
MOTION_FIELDS = ("forward", "strafe", "yaw", "pitch")  # the outputs of a motion probe
PREDICT_BATCH = 128


class FrameProbe(ModelMixin, ConfigMixin):
    """A probe of `task` over frames of side `size`; `outputs` names its outputs (the kinds,
    or MOTION_FIELDS), `scale` the unit of each regression output, `gap` the frames between
    a motion probe's two frames."""

    @register_to_config
    def __init__(self, task: str = "kinds", outputs: tuple[str, ...] = ("imp", "monster"),
                 size: int = 64, channels: tuple[int, ...] = (32, 64, 96, 128),
                 scale: tuple[float, ...] = (), gap: int = 0):
        super().__init__()
        if task not in TASKS:
            raise ValueError(f"probe task must be one of {TASKS}, got {task!r}")
        if not outputs or not all(isinstance(o, str) and o for o in outputs):
            raise ValueError(f"probe outputs must be non-empty names, got {outputs!r}")
        if size % 2 ** len(channels) or size < 2 ** len(channels):
            raise ValueError(f"probe size must be a multiple of 2^{len(channels)} "
                             f"(one per level of channels {channels}), got {size}")
        if task == "motion" and (len(scale) != len(outputs) or min(scale) <= 0 or gap < 1):
            raise ValueError(f"a motion probe needs a positive scale per output "
                             f"{outputs} and gap >= 1, got scale {scale}, gap {gap}")
        layers, c_in = [], 6 if task == "motion" else 3
        for c in channels:
            layers += [nn.Conv2d(c_in, c, 3, stride=2, padding=1), nn.GroupNorm(8, c),
                       nn.SiLU()]
            c_in = c
        self.trunk = nn.Sequential(*layers)
        side = size // 2 ** len(channels)
        self.head = nn.Linear(2 * c_in, len(outputs)) if task == "kinds" else \
            nn.Sequential(nn.Flatten(), nn.Linear(c_in * side * side, 128), nn.SiLU(),
                          nn.Linear(128, len(outputs)))

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        """What the head reads: kinds (b, 3, h, w) -> the trunk's map pooled by its mean and
        its max (b, 2c), a small sprite counts; motion (b, 6, h, w) -> the map (b, c, h', w')."""
        y = self.trunk(x)
        return torch.cat([y.mean((2, 3)), y.amax((2, 3))], 1) \
            if self.config.task == "kinds" else y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pooled(x))

    @torch.no_grad()
    def features(self, frames: np.ndarray) -> np.ndarray:
        """A kinds probe's penultimate features: uint8 frames (n, h, w, 3) -> the pooled
        trunk (n, 2c) in float64, what `evaluate.realism` compares."""
        if self.config.task != "kinds":
            raise ValueError(f"features are read from a kinds probe (one frame in), this "
                             f"is a {self.config.task} probe")
        if frames.ndim != 4 or frames.shape[1:] != (self.config.size, self.config.size, 3):
            raise ValueError(f"this probe reads uint8 frames (n, {self.config.size}, "
                             f"{self.config.size}, 3), got frames of shape {frames.shape}")
        dev = next(self.parameters()).device
        out = [self.pooled(frames_to_tensor(frames[i:i + PREDICT_BATCH]).to(dev)).double().cpu()
               for i in range(0, len(frames), PREDICT_BATCH)]
        return torch.cat(out).numpy() if out else np.zeros((0, 2 * self.config.channels[-1]))

    @torch.no_grad()
    def predict(self, frames: np.ndarray, later: np.ndarray | None = None) -> np.ndarray:
        """uint8 frames (n, h, w, 3) -> kinds: probabilities (n, K); motion (with the
        frames `gap` later, `later` (n, h, w, 3)): the motion in its units (n, 4)."""
        if frames.shape[1:3] != (self.config.size, self.config.size):
            raise ValueError(f"this probe reads {self.config.size} px frames, got frames "
                             f"of shape {frames.shape}")
        if (self.config.task == "motion") != (later is not None):
            raise ValueError(f"a {self.config.task} probe takes "
                             f"{'two' if self.config.task == 'motion' else 'one'} frame(s)")
        dev = next(self.parameters()).device
        out = []
        for i in range(0, len(frames), PREDICT_BATCH):
            x = frames_to_tensor(frames[i:i + PREDICT_BATCH])
            if later is not None:
                x = torch.cat([x, frames_to_tensor(later[i:i + PREDICT_BATCH])], 1)
            y = self(x.to(dev)).float().cpu()
            out.append(torch.sigmoid(y) if self.config.task == "kinds"
                       else y * torch.tensor(self.config.scale))
        return torch.cat(out).numpy() if out else np.zeros((0, len(self.config.outputs)))
