"""Losses, each a `loss_fn(model, batch, generator) -> (loss, logs)` for `fit`.

Flow convention (rectified flow): x_t = (1 - t) x0 + t noise, target velocity v = noise - x0,
t = 0 is clean. The time of each chunk is drawn logit-normal (t = sigmoid(N(0, 1)), as in
Stable Diffusion 3: most samples at mid noise where the velocity is hardest) or uniform.

Shape legend: b batch, t time (frames), n chunks, c channels, h w height width, a action
width, k text tokens (scene / character / event), e text width.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..config import FORCINGS, TIME_SCHEDULES, AutoencoderConfig, TrainConfig
from ..model.discriminator import AutoencoderWithCritic
from ..model.memory_tokens import MemoryChunks
from ..model.textenc import CaptionTable
from .anti_drift import ErrorBank, context_inputs, own_memory, unwrapped

# ----------------------------------------------------------------------------------------
# Flow matching
# ----------------------------------------------------------------------------------------


def sample_flow_time(shape: tuple, generator: torch.Generator,
                     schedule: str = "logit_normal") -> torch.Tensor:
    """Flow times in (0, 1) of `shape`: logit-normal (sigmoid of a standard normal) or uniform."""
    if schedule == "logit_normal":
        return torch.sigmoid(torch.randn(shape, generator=generator))
    if schedule == "uniform":
        return torch.rand(shape, generator=generator)
    raise ValueError(f"unknown time schedule {schedule!r}; expected one of {TIME_SCHEDULES}")


def chunk_times(b: int, n: int, forcing: str, generator: torch.Generator,
                schedule: str = "logit_normal", context_noise: float = 0.0
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-chunk flow time (b, n) and loss mask (b, n) for a forcing mode.

    teacher: the context chunks are clean (t = 0, no loss; or each at its own small time
    t ~ U(0, context_noise), diffusion forcing on the context) and only the last chunk is
    noised, as at sampling time. diffusion: every chunk gets its own time and all carry
    loss, so the model learns to denoise any chunk given a noisy past (Diffusion Forcing).
    """
    if forcing == "teacher":
        t = torch.zeros(b, n)
        if context_noise > 0:
            t[:, :-1] = context_noise * torch.rand(b, n - 1, generator=generator)
        t[:, -1] = sample_flow_time((b,), generator, schedule)
        mask = torch.zeros(b, n)
        mask[:, -1] = 1.0
        return t, mask
    if forcing == "diffusion":
        return sample_flow_time((b, n), generator, schedule), torch.ones(b, n)
    raise ValueError(f"unknown forcing {forcing!r}; expected one of {FORCINGS}")


def flow_matching_loss(model, latents: torch.Tensor, *, chunk_frames: int,
                       generator: torch.Generator, forcing: str = "diffusion",
                       schedule: str = "logit_normal", text_dropout: float = 0.0,
                       actions=None, c2w=None, text=None, inputs=None,
                       context_noise: float = 0.0, observe=None, extra=None
                       ) -> tuple[torch.Tensor, dict]:
    """Rectified-flow velocity loss on latents (b, t, c, h, w); returns (loss, logs).

    Conditions are passed through to the model: actions (b, t, a), c2w (b, t, 4, 4),
    text (b, n, k, e). Each chunk's caption is dropped with probability `text_dropout`
    (`text_drop` (b, n)), which is what classifier-free guidance needs at sampling time.
    `inputs` (b, t, c, h, w), default `latents`, is what gets noised and shown (a corrupted
    or self-generated context, `anti_drift`); the targets stay `latents`. `observe(err, t)`
    sees the last chunk's clean-prediction error (b, f, c, h, w) at its flow time (b,).
    `extra` (memory, cache_latent) goes to the model as it is.
    """
    b, t_len = latents.shape[:2]
    if latents.dim() != 5 or t_len % chunk_frames:
        raise ValueError(f"latents must be (b, t, c, h, w) with t a multiple of chunk_frames "
                         f"({chunk_frames}), got {tuple(latents.shape)}")
    n, dev = t_len // chunk_frames, latents.device
    t, mask = chunk_times(b, n, forcing, generator, schedule, context_noise)  # (b, n) each
    t, mask = t.to(dev), mask.to(dev)
    noise = torch.randn(latents.shape, generator=generator).to(dev, latents.dtype)
    t_frames = t.repeat_interleave(chunk_frames, dim=1).to(latents.dtype)  # (b, t)
    tf = t_frames[:, :, None, None, None]
    x_t = (1 - tf) * (latents if inputs is None else inputs) + tf * noise  # (b, t, c, h, w)
    text_drop = (torch.rand(b, n, generator=generator) < text_dropout).to(dev)
    v = model(x_t, t, actions=actions, c2w=c2w, text=text, text_drop=text_drop, **(extra or {}))
    v = getattr(v, "sample", v)  # (b, t, c, h, w)
    if observe is not None:
        last = slice(t_len - chunk_frames, t_len)
        x0 = x_t[:, last] - tf[:, last] * v[:, last]  # the clean prediction
        observe((x0 - latents[:, last]).detach().float(), t[:, -1])
    err = (v.float() - (noise - latents).float()).pow(2)
    per_chunk = err.unflatten(1, (n, chunk_frames)).flatten(2).mean(-1)  # (b, n)
    loss = (per_chunk * mask).sum() / mask.sum()
    return loss, {"t_mean": float((t * mask).sum() / mask.sum())}


def world_model_loss(cfg: TrainConfig, chunk_frames: int, captions: CaptionTable | None,
                     vocabulary: list[tuple[str, str, str]] | None = None):
    """loss_fn(model, batch, generator) for `fit` on batches with `latents`, `actions`,
    `c2w` and the chunk captions, as strings (`captions`: EpisodeClips + collate_clips) or
    as ids into `vocabulary` (`caption_ids`: ClipTensors, whose `captions` it is). The
    vocabulary is embedded once, on first use, and looked up on the batch's device.
    `captions=None` trains without text."""
    embedded: dict[torch.device, torch.Tensor] = {}  # device -> (u, 3, e)
    bank = ErrorBank() if cfg.context_corruption == "bank" else None

    def text_of(batch: dict, device: torch.device) -> torch.Tensor | None:
        if captions is None:
            return None
        if "caption_ids" not in batch:
            return captions.embed(batch["captions"]).to(device)  # (b, n, 3, e)
        if vocabulary is None:
            raise ValueError("the batches carry caption_ids; pass the vocabulary they index "
                             "(ClipTensors.captions) to world_model_loss")
        if device not in embedded:
            embedded[device] = captions.embed([vocabulary])[0].to(device)
        return embedded[device][batch["caption_ids"]]  # (b, n, 3, e)

    def loss_fn(model, batch: dict, generator: torch.Generator):
        lat = batch["latents"].float()  # (b, t, c, h, w)
        text = text_of(batch, lat.device)
        actions, c2w = batch["actions"].float(), batch["c2w"].float()
        inputs = context_inputs(unwrapped(model), lat, cfg, chunk_frames, generator, bank,
                                actions, c2w, text)
        if cfg.self_rollout_chunks:  # the rollout's lead-in is context for no one: crop it
            d = cfg.self_rollout_chunks
            lat, inputs, actions, c2w = (x[:, d * chunk_frames:]
                                         for x in (lat, inputs, actions, c2w))
            text = None if text is None else text[:, d:]
        loss, logs = flow_matching_loss(
            model, lat, chunk_frames=chunk_frames, generator=generator, forcing=cfg.forcing,
            schedule=cfg.time_schedule, text_dropout=cfg.text_dropout, actions=actions,
            c2w=c2w, text=text, inputs=inputs, context_noise=cfg.context_noise,
            observe=None if bank is None else bank.record,
            extra=memory_inputs(_with_own_memory(model, batch, cfg, generator)))
        if bank is not None:
            logs["bank_errors"] = len(bank)
        return loss, {**logs, **unwrapped(model).memory_gates()}
    return loss_fn


def _with_own_memory(model, batch: dict, cfg: TrainConfig, generator) -> dict:
    """The batch, its memory the model's own on a share of the samples
    (`anti_drift.own_memory`) when the config asks and the clips carry what it needs."""
    if not cfg.memory_own_prob or "memory_before" not in batch:
        return batch
    memory = own_memory(unwrapped(model), batch["memory"].to(batch["latents"].device),
                        batch["memory_before"], cfg.self_rollout_steps, cfg.memory_own_prob,
                        generator)
    return {**batch, "memory": memory}


def memory_inputs(batch: dict) -> dict:
    """The model inputs of the memory a batch carries (`train.memory.MemoryClips`): memory
    (a `MemoryChunks`, on the batch's device) and cache_latent, each only when present."""
    extra = {}
    if "memory" in batch:
        memory = batch["memory"]
        if not isinstance(memory, MemoryChunks):
            raise ValueError(f"batch['memory'] must be a MemoryChunks (train.memory.MemoryClips"
                             f"), got {type(memory).__name__}")
        extra["memory"] = memory.to(batch["latents"].device)
    if "cache_latent" in batch:
        extra["cache_latent"] = batch["cache_latent"].float()
    return extra


# ----------------------------------------------------------------------------------------
# The autoencoder
# ----------------------------------------------------------------------------------------


def spectral_distance(recon: torch.Tensor, x: torch.Tensor,
                      exponent: float = 0.0) -> torch.Tensor:
    """Mean |(|F recon| - |F x|)| over the 2-D Fourier amplitudes (orthonormal, per image and
    channel) of two (..., h, w) batches, each frequency weighted by |k|^exponent (the
    weights' mean is 1, so the exponent moves the term's emphasis, not its scale).

    Pixel L1 and MSE reward the mean of every texture the latent leaves uncertain, and the
    mean of textures at uncertain phases is flat: blur. Amplitudes forget the phase, so this
    term asks for the frame's energy at each frequency even where the decoder cannot know
    where each edge sits; with the pixel terms beside it the phases it can know stay right.
    Unweighted (exponent 0) every frequency counts alike, though the textures' energy is
    small beside the low frequencies'; at exponent 2 the weights follow the Laplacian's
    response, so the term asks for the energy that the sharpness score (the variance of
    the Laplacian) measures. Invariant to circular shifts; 0 only for equal spectra.
    """
    ours, theirs = (torch.fft.rfft2(t.float(), norm="ortho").abs() for t in (recon, x))
    gap = (ours - theirs).abs()
    if exponent == 0:  # plain: every frequency alike, bit for bit the unweighted term
        return gap.mean()
    h, w = x.shape[-2:]
    radius = torch.hypot(torch.fft.fftfreq(h, device=gap.device)[:, None],
                         torch.fft.rfftfreq(w, device=gap.device)[None, :])
    weight = radius.pow(exponent)
    return (gap * (weight / weight.mean())).mean()


def reconstruction_loss(recon: torch.Tensor, kl: torch.Tensor, x: torch.Tensor,
                        cfg: AutoencoderConfig) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """(L1 + mse_weight MSE [+ spectral_weight spectral distance at spectral_exponent],
    kl_weight KL per pixel, logs) of recon vs x (b, c, h, w)."""
    l1 = (recon - x).abs().mean()
    mse = (recon - x).pow(2).mean()
    kl = kl.mean() / x[0].numel()  # per pixel, so kl_weight does not depend on size
    logs = {"l1": l1.item(), "mse": mse.item(), "kl": kl.item()}
    rec = l1 + cfg.mse_weight * mse
    if cfg.spectral_weight > 0:  # off: not computed, the loss is the plain one bit for bit
        spectral = spectral_distance(recon, x, cfg.spectral_exponent)
        logs["spectral"] = spectral.item()
        rec = rec + cfg.spectral_weight * spectral
    return rec, cfg.kl_weight * kl, logs


def autoencoder_loss(cfg: AutoencoderConfig) -> Callable:
    """loss_fn(model, batch, generator) -> (loss, logs) for `fit`.

    L1 (sharp edges) + `mse_weight` MSE (what PSNR measures) + `kl_weight` KL: the KL is
    tiny on purpose, it only keeps the latent scale from drifting; the posterior sample
    (not the mode) makes the decoder robust to small latent errors of the world model.
    The disc_* fields are not read here: the GAN loss is `autoencoder_gan_loss`.
    """
    def loss_fn(model, batch: dict, generator: torch.Generator):
        x = batch["frames"]  # (b, c, h, w)
        recon, kl = model(x, generator=generator)
        rec, kl_term, logs = reconstruction_loss(recon, kl, x, cfg)
        return rec + kl_term, logs
    return loss_fn


# ----------------------------------------------------------------------------------------
# The autoencoder's adversarial terms (hinge GAN with a patch critic)
# ----------------------------------------------------------------------------------------

ADAPTIVE_EPS, ADAPTIVE_MAX = 1e-4, 1e4  # latent-diffusion's guard and clamp


def hinge_d_loss(real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
    """Discriminator hinge loss: mean(relu(1 - D(real))) + mean(relu(1 + D(fake))).

    0 once every real logit is >= 1 and every fake one <= -1: a critic that is sure
    stops learning, which keeps it from overpowering the autoencoder.
    """
    return torch.relu(1.0 - real).mean() + torch.relu(1.0 + fake).mean()


def hinge_g_loss(fake: torch.Tensor) -> torch.Tensor:
    """Generator loss: -mean(D(fake)), lower when the critic finds the fakes more real."""
    return -fake.mean()


def adaptive_weight(rec: torch.Tensor, gen: torch.Tensor, last_layer: torch.Tensor
                    ) -> torch.Tensor:
    """||d rec / d W|| / (||d gen / d W|| + 1e-4), clamped to [0, 1e4], without gradient.

    W is the decoder's last layer (latent-diffusion / taming). Scaling the generator loss
    by this ratio makes its pull on the decoder as strong as the reconstruction's whatever
    the critic's logit scale is, which drifts as the critic trains: a fixed weight would
    need retuning per preset and per run.
    """
    g_rec = torch.autograd.grad(rec, last_layer, retain_graph=True)[0]
    g_gen = torch.autograd.grad(gen, last_layer, retain_graph=True)[0]
    ratio = g_rec.norm() / (g_gen.norm() + ADAPTIVE_EPS)
    return ratio.clamp(0.0, ADAPTIVE_MAX).detach()


def autoencoder_gan_loss(cfg: AutoencoderConfig) -> Callable:
    """loss_fn(model, batch, generator) -> (loss, logs) for `fit` on an
    `AutoencoderWithCritic`: rec + KL + w * L_G + L_D, summed for one backward pass.

    rec + KL is `autoencoder_loss`'s. L_D (`hinge_d_loss` on real frames and detached
    reconstructions) trains the critic from step 0, so it already tells real from blurry
    when the autoencoder starts listening to it. L_G (`hinge_g_loss` through the frozen
    critic) joins after `disc_start` steps of warm-up, with w = disc_weight * the adaptive
    weight; before that its weight is exactly 0 and it is not even computed. Which term
    reaches which network: `AutoencoderWithCritic`. Logs the same keys at every step.
    """
    def loss_fn(model, batch: dict, generator: torch.Generator):
        core = getattr(model, "module", model)  # under DDP the pair sits inside `module`
        if not isinstance(core, AutoencoderWithCritic):
            raise ValueError(f"autoencoder_gan_loss trains an AutoencoderWithCritic, got "
                             f"{type(core).__name__}")
        x = batch["frames"]  # (b, c, h, w)
        adversarial = int(core.step) >= cfg.disc_start  # read before this pass counts
        out = model(x, generator=generator, adversarial=adversarial)
        rec, kl_term, logs = reconstruction_loss(out["recon"], out["kl"], x, cfg)
        d_loss = hinge_d_loss(out["real"], out["fake"])
        loss = rec + kl_term + d_loss
        g_loss = weight = torch.zeros((), device=x.device)
        if adversarial:
            g_loss = hinge_g_loss(out["gen"])
            weight = cfg.disc_weight * adaptive_weight(rec, g_loss, core.last_layer)
            loss = loss + weight * g_loss
        logs.update(d_loss=d_loss.item(), g_loss=g_loss.item(), adv_weight=weight.item(),
                    real_logit=out["real"].mean().item(),
                    fake_logit=out["fake"].mean().item())
        return loss, logs
    return loss_fn
