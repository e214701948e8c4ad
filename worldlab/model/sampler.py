"""Sampling: integrate the model's velocity from noise to a clean chunk, chunk after chunk.

The loop is written out here, apart from the network (as diffusers does), so a reader sees
every step. Rectified flow: x_t = (1 - t) x0 + t noise, the model predicts v = noise - x0,
so dx/dt = v and one step from t to t' < t is x_t' = x_t + (t' - t) v. With a perfect
velocity a single Euler step lands exactly on x0.

`sample_chunk` turns noise into one chunk against a session's KV cache; `rollout` appends
the context chunks to the cache, then generates the rest one chunk at a time, appending each
generated chunk (at t = 0) so the next one sees it. This is the math: at run time (play,
evaluation, notebooks) chunks are made by `memory.stream.Stream`, which calls `sample_chunk`
and `append_generated`; `rollout` and `prefill` serve training's own rollouts
(tests/test_one_stream.py holds the line). Appends are deferred: a chunk's K/V are
computed in the next chunk's first pass (`WorldModel.append_chunk(defer=True)`), so a
4-step sampler costs 4 passes per chunk, not 5.

Shape legend: b batch, t frames, n chunks, f frames per chunk, c latent channels,
h w latent height/width, a action width, k text tokens, e text dim.
"""

from __future__ import annotations

from typing import Callable

import torch

from .memory_tokens import MemoryChunks

from ..config import SOLVERS  # spelled once, in the config that checks it

# ----------------------------------------------------------------------------------------
# One chunk
# ----------------------------------------------------------------------------------------


def guided_velocity(model, x, t, cache, guidance, actions, c2w, text, **extra) -> torch.Tensor:
    """Velocity (b, f, c, h, w) at time t (b,), with classifier-free guidance on text.

    v = v_null + g (v_text - v_null). With g = 1, or without text (then v_text = v_null),
    this is a single forward pass.
    """
    v_text = model.forward_chunk(x, t, cache, actions=actions, c2w=c2w, text=text, **extra)
    if guidance == 1.0 or text is None:
        return v_text
    drop = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
    v_null = model.forward_chunk(x, t, cache, actions=actions, c2w=c2w, text=text,
                                 text_drop=drop, **extra)
    return v_null + guidance * (v_text - v_null)


def _check_sampling(steps, solver, guidance) -> None:
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if not (isinstance(guidance, (int, float)) and torch.isfinite(torch.tensor(guidance))):
        raise ValueError(f"guidance must be a finite number, got {guidance!r}")


@torch.no_grad()
def sample_chunk(model, cache, noise: torch.Tensor, steps: int, solver: str = "euler",
                 guidance: float = 1.0, actions=None, c2w=None, text=None,
                 on_step: Callable[[torch.Tensor, torch.Tensor], None] | None = None,
                 **extra) -> torch.Tensor:
    """Integrate noise (b, f, c, h, w) from t = 1 to t = 0: the clean chunk x0.

    `steps` uniform steps; "euler" uses one velocity per step, "heun" two (it averages the
    slope at both ends of the step: second order, so fewer steps for the same error).
    actions (b, f, a), c2w (b, f, 4, 4), text (b, k, e) belong to this chunk; `extra` passes
    memory / cache_latent through. What the cache holds is not changed (a pending chunk's K/V
    are computed along with the first step). `on_step(x, t)` sees
    the state after every step (a teacher's trajectory for distillation).
    """
    _check_sampling(steps, solver, guidance)
    if isinstance(extra.get("memory"), MemoryChunks):
        # every step reads the same memory: encode it once for the chunk
        extra = {**extra, "memory": model.read_memory(extra["memory"], c2w, cache)}
    b = noise.shape[0]
    times = torch.linspace(1.0, 0.0, steps + 1, dtype=noise.dtype, device=noise.device)
    x = noise
    for t_now, t_next in zip(times[:-1], times[1:]):
        dt = t_next - t_now  # negative: we walk from noise to data
        v = guided_velocity(model, x, t_now.expand(b), cache, guidance, actions, c2w, text,
                            **extra)
        if solver == "heun":
            x_euler = x + dt * v
            v_next = guided_velocity(model, x_euler, t_next.expand(b), cache, guidance,
                                     actions, c2w, text, **extra)
            v = 0.5 * (v + v_next)
        x = x + dt * v
        if on_step is not None:
            on_step(x, t_next)
    return x


# ----------------------------------------------------------------------------------------
# Chunk-by-chunk rollout
# ----------------------------------------------------------------------------------------


def append_generated(model, cache, x0: torch.Tensor, context_noise: float = 0.0,
                     generator: torch.Generator | None = None, **cond) -> None:
    """Append a generated chunk x0 (b, f, c, h, w) to the cache as context for the next
    one (deferred: its K/V ride the next chunk's first pass). With `context_noise` s > 0 it
    goes in noised to flow time s, x_s = (1 - s) x0 + s noise, and is seen at time s
    (diffusion forcing's noisy context: the model is told not to trust it fully)."""
    if not (isinstance(context_noise, (int, float)) and 0.0 <= context_noise < 1.0):
        raise ValueError(f"context_noise must be a flow time in [0, 1), got {context_noise!r}")
    t = None
    if context_noise > 0:
        noise = torch.randn(x0.shape, generator=generator, dtype=x0.dtype,
                            device=generator.device if generator is not None else x0.device)
        x0 = (1 - context_noise) * x0 + context_noise * noise.to(x0.device)
        t = torch.full((x0.shape[0],), float(context_noise), dtype=x0.dtype, device=x0.device)
    model.append_chunk(x0, cache, defer=True, t=t, **cond)



def chunk_conditions(j: int, f: int, actions, c2w, captions) -> dict:
    """The conditions of chunk j: actions (b, f, a), c2w (b, f, 4, 4), text (b, k, e), each
    None where the whole-clip tensor is (actions (b, T, a), c2w, captions (b, n, k, e))."""
    s = slice(j * f, (j + 1) * f)
    return dict(actions=None if actions is None else actions[:, s],
                c2w=None if c2w is None else c2w[:, s],
                text=None if captions is None else captions[:, j])


@torch.no_grad()
def prefill(model, context: torch.Tensor, actions, c2w, captions):
    """A new KV cache holding the clean context chunks (b, t0, c, h, w), conditioned like
    `rollout`'s first t0 frames. Appended at once, not deferred: training runs the next
    pass with gradient, which must not reach the context's K/V."""
    f = model.config.chunk_frames
    cache = model.new_cache(context.shape[0])
    for j in range(context.shape[1] // f):
        model.append_chunk(context[:, j * f:(j + 1) * f], cache,
                           **chunk_conditions(j, f, actions, c2w, captions))
    return cache


def _check_rollout(model, context, actions, c2w, captions) -> tuple[int, int, int]:
    """Return (b, T, t0) after checking the frame counts line up with chunks."""
    f = model.config.chunk_frames
    if not isinstance(context, torch.Tensor) or context.ndim != 5:
        raise ValueError(f"context_latents must be (b, t0, c, h, w), got "
                         f"{getattr(context, 'shape', type(context).__name__)}")
    b, t0 = context.shape[:2]
    if t0 % f:
        raise ValueError(f"context_latents has {t0} frames; expected a multiple of "
                         f"chunk_frames={f}")
    driving = [x for x in (actions, c2w) if x is not None]
    if not driving:
        raise ValueError("rollout needs actions (b, T, a) or c2w (b, T, 4, 4) to know T")
    T = driving[0].shape[1]
    if T % f or T <= t0:
        raise ValueError(f"actions/c2w cover {T} frames; expected a multiple of "
                         f"chunk_frames={f} greater than the {t0} context frames")
    if c2w is not None and actions is not None and c2w.shape[1] != T:
        raise ValueError(f"c2w covers {c2w.shape[1]} frames; expected T={T} like actions")
    if captions is not None and (captions.ndim != 4 or captions.shape[:2] != (b, T // f)):
        raise ValueError(f"captions must be (b={b}, n={T // f}, k, e), one per chunk; got "
                         f"{tuple(captions.shape)}")
    return b, T, t0


@torch.no_grad()
def rollout(model, context_latents: torch.Tensor, actions, c2w, captions, steps: int,
            solver: str = "euler", guidance: float = 1.0,
            generator: torch.Generator | None = None,
            callback: Callable[[int, torch.Tensor], None] | None = None,
            context_noise: float = 0.0) -> torch.Tensor:
    """Generate latents (b, T, c, h, w) chunk by chunk with the KV cache.

    context_latents (b, t0, c, h, w) are clean chunks appended first (t0 a multiple of f,
    possibly 0); actions (b, T, a) / c2w (b, T, 4, 4) cover all T frames, the context's
    first; captions (b, n, k, e) give each of the n = T / f chunks its prompt (or None).
    `callback(chunk_index, x0_chunk)` runs after every generated chunk. The first t0
    output frames are the context itself. `context_noise` noises each generated chunk
    before it becomes context (`append_generated`); the true context goes in clean.
    """
    _check_sampling(steps, solver, guidance)
    b, T, t0 = _check_rollout(model, context_latents, actions, c2w, captions)
    f = model.config.chunk_frames
    cache = model.new_cache(b)
    out = [context_latents]
    for j in range(T // f):
        cond = chunk_conditions(j, f, actions, c2w, captions)
        if j * f < t0:
            chunk = context_latents[:, j * f:(j + 1) * f]
            model.append_chunk(chunk, cache, defer=True, **cond)
        else:
            noise = torch.randn((b, f, *context_latents.shape[2:]), generator=generator,
                                dtype=context_latents.dtype,
                                device=context_latents.device)  # (b, f, c, h, w)
            chunk = sample_chunk(model, cache, noise, steps, solver, guidance, **cond)
            out.append(chunk)
            if callback is not None:
                callback(j, chunk)
            if j < T // f - 1:  # the last chunk has nobody left to attend to it
                append_generated(model, cache, chunk, context_noise, generator, **cond)
    return torch.cat(out, dim=1)
