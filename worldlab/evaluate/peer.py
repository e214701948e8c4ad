"""The peer baseline as a predictor (`evaluate.predictors`): a DIAMOND-style pixel U-Net
(`model.diamond`, trained by `train.diamond`) rolled out frame by frame.

    peer = load_peer("runs/peer/ema")  # or runs/peer/model
    frames = peer.predict(episode, start=0, context=4, frames=12)  # uint8 (8, h, w, 3)

Each frame is sampled from the k (= context_frames) frames before it, true ones first and
then its own, and the action that produced it; a context shorter than k is padded by
repeating its first frame. DIAMOND has no camera pose and no text: `c2w` and the episode's
prompts are ignored, so the peer is scored on what it can do from pixels and actions.

Shape legend: t frames, b batch, k context frames, a action width, h w height width.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..loading import load_module
from ..model.autoencoder import frames_to_tensor, tensor_to_frames
from ..model.diamond import DiamondUNet, sample_next

DEFAULT_STEPS = 3  # DIAMOND's sampling steps (Euler)


class DiamondPredictor:
    """A trained `DiamondUNet` sampled with `steps` Euler steps; `chunk_frames` is only the
    granularity the protocols start and score on (4, the shipped world's)."""

    def __init__(self, model: DiamondUNet, steps: int = DEFAULT_STEPS, chunk_frames: int = 4,
                 name: str = "diamond", solver: str = "euler"):
        if steps < 1 or chunk_frames < 1:
            raise ValueError(f"steps and chunk_frames must be >= 1, got {steps}, "
                             f"{chunk_frames}")
        self.model, self.steps, self.chunk_frames = model.eval(), steps, chunk_frames
        self.name, self.solver = name, solver
        self.path: Path | None = None  # the directory it was loaded from

    @property
    def size(self) -> int:
        return self.model.cfg.size

    @property
    def context_chunks(self) -> int:
        """The chunks that hold its `context_frames` (the context it was trained with)."""
        return -(-self.model.cfg.context_frames // self.chunk_frames)

    @torch.no_grad()
    def predict(self, episode, start: int, context: int, frames: int,
                actions: np.ndarray | None = None, c2w: np.ndarray | None = None,
                seed: int = 0) -> np.ndarray:
        """uint8 (frames - context, h, w, 3): the frames [start + context, start + frames)
        from the true frames [start, start + context) and the episode's (or the given,
        (frames, a)) actions; `c2w` is ignored. Seeded by `seed` alone."""
        k, s = self.model.cfg.context_frames, self.size
        if not 1 <= context < frames or start < 0 or start + context > len(episode):
            raise ValueError(f"need 0 <= start and 1 <= context < frames with the context "
                             f"inside the episode ({len(episode)} frames), got start {start}, "
                             f"context {context}, frames {frames}")
        acts = episode.actions[start:start + frames] if actions is None else np.asarray(actions)
        if acts.shape != (frames, self.model.cfg.action_width):
            raise ValueError(f"actions must be (frames, a) = ({frames}, "
                             f"{self.model.cfg.action_width}), got {acts.shape}")
        true = episode.rgb[start:start + context]  # (context, h, w, 3)
        if true.shape[1:] != (s, s, 3):
            raise ValueError(f"the peer was trained on {s} px frames; the episode has "
                             f"{true.shape[1:]}")
        device = next(self.model.parameters()).device
        dtype = next(self.model.parameters()).dtype
        window = frames_to_tensor(true).to(device, dtype)  # (context, 3, h, w)
        if context < k:
            window = torch.cat([window[:1].expand(k - context, -1, -1, -1), window])
        window = list(window[-k:])  # k frames (3, h, w)
        act = torch.as_tensor(acts, dtype=torch.float32, device=device)  # (frames, a)
        g = torch.Generator().manual_seed(seed)
        out = []
        for t in range(context, frames):
            ctx = torch.cat(window[-k:])[None]  # (1, k * 3, h, w)
            nxt = sample_next(self.model, ctx, act[t][None], steps=self.steps, generator=g,
                              solver=self.solver)[0]  # (3, h, w)
            window.append(nxt)
            out.append(nxt)
        return tensor_to_frames(torch.stack(out))  # (frames - context, h, w, 3)


def load_peer(path, device: str = "cpu", steps: int | None = None,
              chunk_frames: int = 4) -> DiamondPredictor:
    """A `DiamondPredictor` from a save_pretrained directory of a `DiamondUNet` (a run's
    `out/ema` or `out/model`), safetensors only and every tensor checked
    (`loading.load_module`); `steps` sampling steps (default DEFAULT_STEPS)."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"peer directory {path} does not exist (expected a DiamondUNet "
                         f"save_pretrained directory, e.g. runs/peer/ema)")
    model = load_module(DiamondUNet, path).float().to(device)
    peer = DiamondPredictor(model, DEFAULT_STEPS if steps is None else steps, chunk_frames)
    peer.path = path
    return peer
