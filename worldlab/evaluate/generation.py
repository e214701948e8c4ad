"""Generating from an engine episode: a world continues the episode's true frames under its
actions, poses and prompts (`generate`), the step every protocol and predictor shares.

Shape legend: t frames, n chunks, k = 3 caption fields, e text width.
"""

from __future__ import annotations

import numpy as np
import torch

from ..config import check_sampling_steps
from ..model.sampler import rollout
from ..pretrained import World


def episode_conditions(world: World, episode, start: int, frames: int,
                       actions: np.ndarray | None = None, c2w: np.ndarray | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Actions (1, frames, a), poses (1, frames, 4, 4) on the world's device and captions
    (1, n, k, e) of the episode's frames [start, start + frames), one caption per chunk;
    `actions` / `c2w` (frames, ...) replace the episode's."""
    f, dev, s = world.chunk_frames, world.device, slice(start, start + frames)
    acts = episode.actions[s] if actions is None else actions
    poses = episode.c2w[s] if c2w is None else c2w
    caps = [episode.caption_at(start + k * f).caption() for k in range(frames // f)]
    return (torch.as_tensor(acts, dtype=torch.float32, device=dev)[None],
            torch.as_tensor(poses, dtype=torch.float32, device=dev)[None], world.embed(caps))


@torch.no_grad()
def generate(world: World, episode, start: int, context: int, frames: int,
             actions: np.ndarray | None = None, c2w: np.ndarray | None = None,
             steps: int | None = None, seed: int = 0) -> np.ndarray:
    """Frames [start + context, start + frames) generated from the true frames
    [start, start + context), driven by the episode's (or the given) actions and poses."""
    dev, cfg = world.device, world.config.sample
    check_sampling_steps(world.config, steps or cfg.steps)
    ctx = world.encode(episode.rgb[start:start + context])
    lat = rollout(world.model, ctx, *episode_conditions(world, episode, start, frames, actions,
                                                        c2w),
                  steps=steps or cfg.steps, solver=cfg.solver,
                  guidance=cfg.guidance, context_noise=cfg.context_noise,
                  generator=torch.Generator(device=dev).manual_seed(seed))
    return world.decode(lat[:, context:])
