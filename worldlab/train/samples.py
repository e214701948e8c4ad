"""What a training run shows of itself in TensorBoard beside its losses: at every checkpoint,
an image of what the model makes against the engine's own frames (`fit(..., samples=)`).

    autoencoder: top row the engine's held-out frames, bottom row their reconstructions;
    world:       top row a clip's last chunk from the engine, bottom row the world's sample of
                 it from the true chunks before (teacher-forced next chunk), decoded.

Each function returns `draw(model) -> uint8 (h, w, 3)`; `fit` calls it on the weights it
trains (the EMA copy when there is one) in eval mode.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ..viz import frame_grid


def _uint8(x: torch.Tensor) -> np.ndarray:
    """(n, c, h, w) in [-1, 1] (RGB first) -> uint8 (n, h, w, 3)."""
    rgb = ((x[:, :3].clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
    return rgb.permute(0, 2, 3, 1).cpu().numpy()


def reconstructions(frames: torch.Tensor) -> Callable[[torch.nn.Module], np.ndarray]:
    """frames (n, c, h, w) in [-1, 1]: the engine's over the autoencoder's."""
    if frames.ndim != 4 or not len(frames):
        raise ValueError(f"frames must be (n, c, h, w) with n >= 1, got {tuple(frames.shape)}")

    @torch.no_grad()
    def draw(model) -> np.ndarray:
        ae = getattr(model, "autoencoder", model)  # the GAN trainee wraps it with its critic
        x = frames.to(next(ae.parameters()).device)
        recon = ae.decode(ae.encode(x[:, None]))[:, 0]  # one-frame videos: (n, c, h, w)
        return frame_grid(np.concatenate([_uint8(x), _uint8(recon)]), cols=len(x))
    return draw


def next_chunks(batch: dict, autoencoder, steps: int) -> Callable[[torch.nn.Module], np.ndarray]:
    """`batch` (ClipTensors.gather of a few clips): each clip's last chunk sampled by the
    world from the chunks before it (`steps` Euler steps, no prompt), decoded by
    `autoencoder` (a VideoAutoencoder), under the engine's."""
    from ..model.sampler import rollout

    @torch.no_grad()
    def draw(model) -> np.ndarray:
        device = next(model.parameters()).device
        f = model.config.chunk_frames
        lat = batch["latents"].to(device)  # (b, t, c, h, w)
        gen = rollout(model, lat[:, :-f], batch["actions"].to(device), batch["c2w"].to(device),
                      None, steps, generator=torch.Generator(device).manual_seed(0))
        ae = autoencoder.to(device).eval()
        rows = [_uint8(ae.decode(x[:, -f:]).flatten(0, 1)) for x in (lat, gen)]  # (b*f, ...)
        return frame_grid(np.concatenate(rows), cols=len(rows[0]))
    return draw
