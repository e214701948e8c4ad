"""The losses of few-step students (`train/distill.py` runs them), each a small function.

Flow convention as everywhere: x_t = (1 - t) x0 + t noise, v = noise - x0, t = 0 clean, so a
velocity v at x_t predicts the clean chunk x0_hat = x_t - t v. A student is the teacher's
`WorldModel` sampled with S Euler steps on the grid t_k = 1 - k / S.

Every chunk is scored teacher-forced, as the causal model samples it: its clean context
first (t = 0), the chunk itself at its own time, in one full-clip pass (the same numbers as
the KV-cache path, `model/dit.py`).

Shape legend: b batch, t0 context frames, f frames per chunk, c h w latent, S student steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..model.sampler import chunk_conditions, prefill


@dataclass
class Conditions:
    """A clip's conditions: actions (b, T, a), c2w (b, T, 4, 4), text (b, n, k, e) or None."""
    actions: torch.Tensor
    c2w: torch.Tensor
    text: torch.Tensor | None

    def chunk(self, j: int, f: int) -> dict:
        return chunk_conditions(j, f, self.actions, self.c2w, self.text)


def student_grid(steps: int, device=None) -> torch.Tensor:
    """The S + 1 flow times (S + 1,) a student of `steps` Euler steps visits, 1 -> 0."""
    return torch.linspace(1.0, 0.0, steps + 1, device=device)


def chunk_velocity(model, context: torch.Tensor, x: torch.Tensor, t: torch.Tensor,
                   cond: Conditions) -> torch.Tensor:
    """Velocity (b, f, c, h, w) of chunk x at flow time t (b,) after the clean context
    (b, t0, c, h, w); the conditions cover the clip from its first frame."""
    f = x.shape[1]
    frames = context.shape[1] + f
    n = frames // f
    times = torch.zeros(x.shape[0], n, device=x.device, dtype=x.dtype)
    times[:, -1] = t
    text = None if cond.text is None else cond.text[:, :n]
    v = model(torch.cat([context, x], 1), times, actions=cond.actions[:, :frames],
              c2w=cond.c2w[:, :frames], text=text)
    return getattr(v, "sample", v)[:, -f:]


def clean_prediction(model, context, x, t, cond) -> torch.Tensor:
    """x0_hat = x_t - t v (b, f, c, h, w): where the model thinks chunk x_t lands."""
    return x - t[:, None, None, None, None] * chunk_velocity(model, context, x, t, cond)


def noised(x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """x_t = (1 - t) x0 + t noise for t (b,)."""
    tt = t[:, None, None, None, None]
    return (1 - tt) * x0 + tt * noise


# ----------------------------------------------------------------------------------------
# Few-step initialisation: the teacher's own ODE, or consistency
# ----------------------------------------------------------------------------------------


def ode_regression_loss(student, context, trajectory, cond, k: torch.Tensor,
                        grid: torch.Tensor) -> torch.Tensor:
    """The student's one step from the teacher's state at t_k must land where the teacher
    landed at t_k+1. trajectory (b, S + 1, f, c, h, w) on `grid`, k (b,) step indices."""
    rows = torch.arange(k.shape[0], device=k.device)
    x, x_next = trajectory[rows, k], trajectory[rows, k + 1]  # (b, f, c, h, w)
    t, t_next = grid[k], grid[k + 1]  # (b,)
    target = (x_next - x) / (t_next - t)[:, None, None, None, None]
    return F.mse_loss(chunk_velocity(student, context, x, t, cond), target)


def consistency_loss(student, teacher, context, x0, cond, noise, i: torch.Tensor,
                     teacher_steps: int) -> torch.Tensor:
    """Causal consistency distillation: from x_t on the teacher's grid (t = i / N, i (b,) in
    1..N) one teacher Euler step reaches x_t' (t' = (i - 1) / N); the student's clean
    prediction at (x_t, t) must equal its own (stopped) prediction at (x_t', t'), which is
    x_t' itself at t' = 0: the boundary that anchors the chain. x0 (b, f, c, h, w)."""
    t, t_prev = i / teacher_steps, (i - 1) / teacher_steps  # (b,)
    x_t = noised(x0, t, noise)
    with torch.no_grad():
        v = chunk_velocity(teacher, context, x_t, t, cond)
        x_prev = x_t + (t_prev - t)[:, None, None, None, None] * v
        target = clean_prediction(student, context, x_prev, t_prev, cond)
    return F.mse_loss(clean_prediction(student, context, x_t, t, cond), target)


# ----------------------------------------------------------------------------------------
# Distribution matching on the student's own rollouts
# ----------------------------------------------------------------------------------------


def self_rollout(student, first: torch.Tensor, cond: Conditions, chunks: int, steps: int,
                 exit_step: int, grad_chunks: int, noise: torch.Tensor) -> torch.Tensor:
    """Self-Forcing: after the true first chunk(s) first (b, t0, c, h, w) the student makes
    `chunks` chunks one by one with its own KV cache, each ending at step `exit_step` of
    its S-step grid with its clean prediction there. Only the final step of the last
    `grad_chunks` chunks carries gradient. noise (b, chunks, f, c, h, w). Returns
    (b, chunks f, c, h, w)."""
    f = student.config.chunk_frames
    grid = student_grid(steps, first.device)
    cache = prefill(student, first, cond.actions, cond.c2w, cond.text)
    n0 = first.shape[1] // f
    out = []
    for j in range(chunks):
        c = cond.chunk(n0 + j, f)
        x = noise[:, j]
        for s in range(exit_step + 1):
            t = grid[s].expand(x.shape[0])
            last = s == exit_step
            with torch.set_grad_enabled(last and j >= chunks - grad_chunks):
                v = student.forward_chunk(x, t, cache, **c)
                x = x - grid[s] * v if last else x + (grid[s + 1] - grid[s]) * v
        out.append(x)
        if j < chunks - 1:
            with torch.no_grad():
                student.append_chunk(x.detach(), cache, **c)
    return torch.cat(out, 1)


def critic_loss(critic, context, x0, cond, t, noise) -> torch.Tensor:
    """The fake score learns the student's distribution: the flow loss on a generated chunk
    x0 (b, f, c, h, w) (detached) after its own clean context."""
    x_t = noised(x0, t, noise)
    return F.mse_loss(chunk_velocity(critic, context, x_t, t, cond), noise - x0)


def dmd_loss(x0, context, cond, teacher, critic, t, noise) -> torch.Tensor:
    """Distribution matching (DMD): re-noise the generated chunk x0 (b, f, c, h, w) to time
    t (b,); the teacher's and the critic's clean predictions there differ by the gradient of
    KL(student || teacher); normalised per sample by the distance to the teacher's
    prediction. The loss 0.5 ||x0 - sg(x0 - grad)||^2 has exactly that gradient."""
    x_t = noised(x0.detach(), t, noise)
    with torch.no_grad():
        real = clean_prediction(teacher, context, x_t, t, cond)
        fake = clean_prediction(critic, context, x_t, t, cond)
        scale = (x0 - real).abs().mean(dim=(1, 2, 3, 4), keepdim=True).clamp_min(1e-6)
        grad = (fake - real) / scale
    return 0.5 * F.mse_loss(x0, (x0 - grad).detach())
