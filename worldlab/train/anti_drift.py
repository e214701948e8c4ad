"""Long horizon: what the context chunks of a training clip look like, so that a rollout's
own errors do not compound. Each is a `TrainConfig` switch, off by default.

A world trained with teacher forcing only ever sees a clean, true context; in play its
context is its own output, whose small errors it has never seen and then amplifies
(exposure bias). These remedies change the context chunks of a clip; the last chunk's
target stays the engine's truth (so they need forcing="teacher"):

    context_corruption  on a share `corruption_prob` of the samples the context is
                        corrupted: "noise", "blur" or "colour" (simple corruptions, the
                        baseline), or "bank": the model's own errors (its clean prediction
                        minus the truth, recorded as it trains in an `ErrorBank`) added to
                        the context (AlayaWorld, after Stable Video Infinity's error
                        recycling)
    context_noise       diffusion forcing on the context: each context chunk at its own
                        small flow time t ~ U(0, context_noise) (`losses.chunk_times`), and
                        `sample.context_noise` in play, so the model trusts its context less
    self_rollout_prob   on that share of the steps the context after the first chunk is the
                        model's own rollout under the clip's actions (`self_rollout_steps`
                        Euler steps with its KV cache, no gradient); the last chunk is still
                        trained against the engine's frames for the same actions
                        (Self-Forcing, Stable Forcing's rollout replay: the engine gives the
                        truth after any rollout, which no video data set can);
                        `self_rollout_chunks` more chunks read before the clip make the
                        rollout that much deeper, cropped away before the loss, so the
                        context is what play shows after many chunks of its own
    memory_own_prob     on that share of the samples the retrieved memory chunks are the
                        model's own generations of them (`own_memory`), as in play

Shape legend: b batch, t frames, n chunks, f frames per chunk, c latent channels,
h w latent height/width, a action width, k text tokens, e text width.
"""

from __future__ import annotations

import collections

import torch
import torch.nn.functional as F

from ..config import TrainConfig
from ..model.memory_tokens import MemoryChunks
from ..model.sampler import rollout

BANK_BUCKETS = 10  # flow-time buckets of the error bank: [0, 0.1), [0.1, 0.2), ...
BANK_SIZE = 256  # errors kept per bucket (the most recent)
# errors drawn from predictions at t <= this: the size of error a few-step sampler leaves,
# not the guess from pure noise (whose error is the whole frame)
BANK_MAX_T = 0.5
NOISE_MAX, COLOUR_STD = 0.5, 0.3  # latent units (latents are scaled to unit variance)


class ErrorBank:
    """The model's recent errors by flow time: `record` keeps the last BANK_SIZE per bucket,
    `draw` returns some of those from predictions at t <= BANK_MAX_T.

    It lives in memory for one run: a resumed run starts with an empty bank and clean
    contexts until the first steps have filled it."""

    def __init__(self):
        self.buckets = [collections.deque(maxlen=BANK_SIZE) for _ in range(BANK_BUCKETS)]

    def __len__(self) -> int:
        return sum(map(len, self.buckets))

    def record(self, errors: torch.Tensor, t: torch.Tensor) -> None:
        """errors (b, f, c, h, w): clean prediction minus truth of chunks at flow time t (b,).
        Non-finite errors (a diverged step) raise and leave the bank as it was."""
        bad = int((~torch.isfinite(errors)).sum())
        if bad:
            raise ValueError(f"the error bank was fed non-finite errors ({bad} of "
                             f"{errors.numel()} values are NaN or inf): the step that made "
                             f"them diverged")
        index = (t.detach().float() * BANK_BUCKETS).long().clamp(0, BANK_BUCKETS - 1)
        for e, i in zip(errors.detach(), index.tolist()):
            self.buckets[i].append(e.clone())

    def draw(self, count: int, generator: torch.Generator) -> torch.Tensor | None:
        """`count` recorded errors (count, f, c, h, w), each from a bucket drawn uniformly
        among the filled ones at t <= BANK_MAX_T; None while those are all empty."""
        filled = [b for b in self.buckets[:round(BANK_MAX_T * BANK_BUCKETS)] if b]
        if not filled:
            return None
        picks = torch.randint(0, 2 ** 31 - 1, (count, 2), generator=generator).tolist()
        return torch.stack([filled[i % len(filled)][j % len(filled[i % len(filled)])]
                            for i, j in picks])


def corrupt(context: torch.Tensor, kind: str, generator: torch.Generator,
            bank: ErrorBank | None = None) -> torch.Tensor:
    """A corrupted copy of context chunks (b, m, f, c, h, w), a strength drawn per sample:
    "noise" adds Gaussian noise (std up to NOISE_MAX), "blur" blends each latent frame with
    its 3x3 box blur, "colour" shifts each latent channel by one offset per sample (the
    palette drift of a long rollout), "bank" adds recorded errors (one per chunk)."""
    b, m = context.shape[:2]
    dev, dt = context.device, context.dtype
    u = torch.rand(b, generator=generator).to(dev, dt)[:, None, None, None, None, None]
    if kind == "noise":
        return context + u * NOISE_MAX * torch.randn(context.shape, generator=generator
                                                     ).to(dev, dt)
    if kind == "blur":
        frames = context.flatten(0, 2)  # (b m f, c, h, w)
        blurred = F.avg_pool2d(frames, 3, stride=1, padding=1, count_include_pad=False)
        return context + u * (blurred.view_as(context) - context)
    if kind == "colour":
        shift = COLOUR_STD * torch.randn(b, 1, 1, context.shape[3], 1, 1,
                                         generator=generator).to(dev, dt)
        return context + shift
    if kind == "bank":
        errors = None if bank is None else bank.draw(b * m, generator)
        return context if errors is None else context + errors.view_as(context).to(dev, dt)
    raise ValueError(f"unknown context corruption {kind!r}")


@torch.no_grad()
def own_rollout(model, latents: torch.Tensor, chunk_frames: int, steps: int,
                generator: torch.Generator, actions=None, c2w=None,
                text=None) -> torch.Tensor:
    """The clip latents (b, t, c, h, w) with chunks 1 .. n-2 replaced by the model's own
    rollout from the true chunk 0 under the clip's actions (b, t, a), poses (b, t, 4, 4)
    and captions (b, n, k, e); the last chunk stays the truth (it is the target)."""
    f, t = chunk_frames, latents.shape[1]
    if t // f < 3:
        return latents  # no chunk between the first and the target
    keep = slice(0, t - f)  # every chunk but the last drives and is rolled out
    was_training = model.training
    model.eval()
    try:
        own = rollout(model, latents[:, :f], None if actions is None else actions[:, keep],
                      None if c2w is None else c2w[:, keep],
                      None if text is None else text[:, :t // f - 1], steps,
                      generator=_device_generator(generator, latents.device))
    finally:
        model.train(was_training)
    return torch.cat([own, latents[:, t - f:]], dim=1)


@torch.no_grad()
def own_memory(model, memory: MemoryChunks, before: dict, steps: int, prob: float,
               generator: torch.Generator) -> MemoryChunks:
    """`memory` (latents (b, k, f, c, h, w)) with, on a share `prob` of the samples, every
    slot that has a chunk before it (`before["ok"]` (b, k)) replaced by the model's own
    generation of it from that engine chunk (`before["latents"]` (b, k, f, ...), under the
    two chunks' actions (b, k, 2f, a) and poses (b, k, 2f, 4, 4), no prompt, `steps` Euler
    steps): what play's memory holds, generated chunks, instead of the engine's."""
    b, k, f = memory.latents.shape[:3]
    hit = (torch.rand(b, generator=generator) < prob).to(memory.latents.device)
    use = hit[:, None] & before["ok"]  # (b, k)
    if not bool(use.any()):
        return memory
    latents, g = memory.latents.clone(), _device_generator(generator, memory.latents.device)
    was_training = model.training
    model.eval()
    try:
        for j in range(k):
            rows = use[:, j]
            if bool(rows.any()):
                own = rollout(model, before["latents"][rows, j], before["actions"][rows, j],
                              before["c2w"][rows, j], None, steps, generator=g)
                latents[rows, j] = own[:, f:].to(latents.dtype)
    finally:
        model.train(was_training)
    return MemoryChunks(latents, memory.c2w, memory.valid)


def _device_generator(generator: torch.Generator, device) -> torch.Generator:
    """A generator on `device` seeded from `generator` (the rollout's noise lives there)."""
    seed = int(torch.randint(0, 2 ** 62, (1,), generator=generator))
    return torch.Generator(device=device).manual_seed(seed)


def context_inputs(model, latents: torch.Tensor, cfg: TrainConfig, chunk_frames: int,
                   generator: torch.Generator, bank: ErrorBank | None, actions=None,
                   c2w=None, text=None) -> torch.Tensor:
    """What the model sees for a clip (b, t, c, h, w) under the switches of `cfg`: its own
    rollout as context on a share of the steps, then the context corrupted on a share of
    the samples. The last chunk is always the truth. Draws nothing when all are off."""
    f, (b, t) = chunk_frames, latents.shape[:2]
    inputs = latents
    if cfg.self_rollout_prob > 0 and float(torch.rand(1, generator=generator)) \
            < cfg.self_rollout_prob:
        inputs = own_rollout(model, latents, f, cfg.self_rollout_steps, generator, actions,
                             c2w, text)
    if cfg.context_corruption != "none":
        context = inputs[:, :t - f].unflatten(1, (t // f - 1, f))  # (b, n-1, f, c, h, w)
        hit = (torch.rand(b, generator=generator) < cfg.corruption_prob).to(latents.device)
        bad = corrupt(context, cfg.context_corruption, generator, bank)
        context = torch.where(hit[:, None, None, None, None, None], bad, context)
        inputs = torch.cat([context.flatten(1, 2), inputs[:, t - f:]], dim=1)
    return inputs


def unwrapped(model):
    """The WorldModel inside an accelerate/DDP (`module`) or torch.compile (`_orig_mod`)
    wrapper."""
    for attr in ("module", "_orig_mod"):
        model = getattr(model, attr, model)
    return model
