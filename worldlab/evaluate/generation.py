"""Generating from an engine episode: a world continues the episode's true frames under its
actions, poses and prompts (`generate`), the step every protocol and predictor shares. It
streams with the world's own memory (`memory.stream`; all off: the plain KV stream), so a
world that reads its 3D cache every chunk (the geometry input) gets it here too: the true
context frames are fused, then each generated chunk's decoded frames. The revisit protocol's
whole-episode rollouts and their costs are `memory_rollout`'s.

Shape legend: t frames, n chunks, f frames per chunk, k = 3 caption fields, e text width.
"""

from __future__ import annotations

import numpy as np
import torch

from ..config import check_sampling_steps, uses_memory
from ..memory.stream import world_stream
from ..model.sampler import chunk_conditions
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
    [start, start + context), driven by the episode's (or the given) actions and poses;
    context and frames are whole chunks. One generator (on the world's device, from `seed`)
    draws each chunk's noise and, with sample.context_noise, the noise of its context. A
    world with memory.cache3d="oracle" fuses the episode's depth of the frames before each
    chunk (never of the chunk generated)."""
    f, dev, cfg = world.chunk_frames, world.device, world.config.sample
    if context % f or frames % f or not 0 <= context < frames:
        raise ValueError(f"context={context} and frames={frames} must be multiples of "
                         f"chunk_frames={f} with context < frames")
    check_sampling_steps(world.config, steps or cfg.steps)
    ctx = world.encode(episode.rgb[start:start + context])  # (1, context, c, h, w)
    conditions = episode_conditions(world, episode, start, frames, actions, c2w)
    stream = world_stream(world, episode.K[0] if uses_memory(world.config.memory) else None)
    g = torch.Generator(device=dev).manual_seed(seed)
    for j in range(context // f):
        s = slice(start + j * f, start + (j + 1) * f)
        stream.append_truth(ctx[:, j * f:(j + 1) * f], chunk_conditions(j, f, *conditions),
                            episode.rgb[s], _depth(episode, s))
    out, shown = [], []  # latents per chunk; with a 3D cache, the frames chunk by chunk
    for j in range(context // f, frames // f):
        cond = chunk_conditions(j, f, *conditions)
        noise = torch.randn((1, f, *ctx.shape[2:]), generator=g, dtype=ctx.dtype,
                            device=ctx.device)  # (1, f, c, h, w)
        out.append(stream.generate(noise, cond, steps))
        if stream.points is not None:  # the 3D cache fuses (and may paint) what it drew
            stream.append(out[-1], cond, g)  # the last one too: its cameras place the paint
            s = slice(start + j * f, start + (j + 1) * f)
            shown.append(stream.show(world.decode(out[-1]), _depth(episode, s)))
        elif j < frames // f - 1:  # the last chunk has nobody left to attend to it
            stream.append(out[-1], cond, g)
    # the decoders are frame by frame: decoding chunk by chunk gives the same frames
    return np.concatenate(shown) if shown else world.decode(torch.cat(out, dim=1))


def _depth(episode, frames: slice):
    """The episode's depth of `frames`, or None when it has none (read by the oracle 3D
    cache only)."""
    return None if episode.depth is None else episode.depth[frames]
