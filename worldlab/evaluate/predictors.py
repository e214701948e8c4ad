"""What the evaluation suite scores: anything that continues an engine episode from its
true frames, driven by the episode's controls and prompts.

A predictor has `name`, `size` (frame side), `chunk_frames` (the granularity of its context:
protocols start and score on multiples of it), optionally `context_chunks` (the context it
was trained with, which the next-chunk protocol gives it; 1 when absent) and

    predict(episode, start, context, frames, actions=None, c2w=None, seed=0)
        -> uint8 (frames - context, h, w, 3): the frames [start + context, start + frames)
           generated from the true frames [start, start + context), driven by the
           episode's (or the given) actions (frames, a) and poses (frames, 4, 4) and the
           episode's prompts

Three kinds are scored in the same tables: a world (`WorldPredictor`, the DiT on its
autoencoder's latents), the peer baseline (`evaluate.peer.DiamondPredictor`, a pixel-space
U-Net) and the trivial `RepeatPredictor`. `as_predictor` wraps a `World` and passes any
predictor through.

Shape legend: t frames, h w height/width, a action width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..pretrained import World
from .baselines import repeat_baseline
from .generation import generate


@dataclass
class WorldPredictor:
    """A world model (`World`), sampled with `steps` (default: its own sample.steps)."""

    world: World
    steps: int | None = None
    name: str = "world"

    @property
    def size(self) -> int:
        return self.world.size

    @property
    def chunk_frames(self) -> int:
        return self.world.chunk_frames

    @property
    def context_chunks(self) -> int:
        """The context it was trained with: its KV window."""
        return self.world.config.model.window_chunks

    def predict(self, episode, start: int, context: int, frames: int,
                actions: np.ndarray | None = None, c2w: np.ndarray | None = None,
                seed: int = 0) -> np.ndarray:
        return generate(self.world, episode, start, context, frames, actions, c2w,
                        steps=self.steps, seed=seed)


@dataclass
class RepeatPredictor:
    """The last true frame, forever: a predictor that ignores controls and prompts."""

    size: int
    chunk_frames: int
    name: str = "repeat"

    def predict(self, episode, start: int, context: int, frames: int,
                actions: np.ndarray | None = None, c2w: np.ndarray | None = None,
                seed: int = 0) -> np.ndarray:
        return repeat_baseline(episode.rgb[start + context - 1], frames - context)


def as_predictor(model, steps: int | None = None, name: str | None = None):
    """A `World` wrapped as a `WorldPredictor` (`steps` sampling steps), or `model` itself
    when it already has `predict`."""
    if isinstance(model, World):
        return WorldPredictor(model, steps, name or "world")
    if not callable(getattr(model, "predict", None)):
        raise TypeError(f"expected a World or a predictor with predict(episode, start, "
                        f"context, frames, ...), got {type(model).__name__}")
    return model
