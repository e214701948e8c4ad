"""Distil a world's full decoder into a small fast one (`model.fast_decoder.FastDecoder`).

    run = wl.train.distill_decoder("data/checkpoints/doom64", "runs/w2/data900",
                                   "runs/w2/data/latents", "runs/fast_decoder", minutes=12)

The inputs are the world's own latents, cached per episode (`LatentCache`, filled by the
world's encoder): the fast decoder learns to read exactly what the world model makes. The
target is the engine's frames of those latents (`target="frames"`) or the full decoder's
reconstruction of them (`target="decoder"`, computed every step). "frames" is the default:
in 400-step trials on the DOOM data (300 episodes) it scored 23.68 dB against held-out
engine frames where "decoder" scored 23.58, and its steps need no full-decoder pass.
Training runs through
`fit` (checkpoints, resume); the result is `out/model`, what `pretrained.package_world`
takes as `fast_decoder`, and `out/metrics.json`, both decoders scored on held-out episodes.

Shape legend: n frames, b batch, c channels, h w height width.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..atomic import atomic_write_json
from ..config import TrainConfig
from ..episodes import EpisodeStore, LatentCache, load_frames
from ..episodes.datasets import check_latent_frames
from ..loading import load_module
from ..metrics import psnr, ssim
from ..model.autoencoder import VideoAutoencoder, frames_to_tensor
from ..model.fast_decoder import FastDecoder, check_decoder_pair
from ..pretrained import World, resolve_checkpoint
from .loop import fit, make_accelerator, steps_for_budget
from .recipes import HELD_OUT_FRAMES, seeded, split_episodes

TARGETS = ("frames", "decoder")


def decoder_train_config(**overrides: Any) -> TrainConfig:
    """The TrainConfig of `distill_decoder`: small batches, a high learning rate and no
    EMA suit a small network trained for minutes (a few thousand steps)."""
    base = dict(steps=2000, batch_size=16, lr=1e-3, weight_decay=0.0, warmup_steps=100,
                ema_decay=0.0, checkpoint_every=250)
    return TrainConfig(**{**base, **overrides})


class LatentFrames:
    """Every frame of some episodes with its cached latent, held in memory; `gather`
    gives a batch: latents (b, c', h', w') float32 and frames (b, c, h, w) in [-1, 1]."""

    def __init__(self, store: EpisodeStore, cache: LatentCache, ids: list[str],
                 depth: bool = False):
        self.rgb, self.depth = load_frames(store, ids, depth)  # (n, h, w, 3), (n, h, w)
        self.latents = np.concatenate([  # (n, c', h', w') float16, as cached
            check_latent_frames(i, cache.get(i), store.index[i]["frames"]) for i in ids])

    def __len__(self) -> int:
        return len(self.rgb)

    def gather(self, indices) -> dict[str, torch.Tensor]:
        idx = np.asarray(indices)
        depth = None if self.depth is None else self.depth[idx]
        return {"latents": torch.from_numpy(self.latents[idx].astype(np.float32)),
                "frames": frames_to_tensor(self.rgb[idx], depth)}


def decoder_loss(target: str, teacher: VideoAutoencoder) -> Callable:
    """loss_fn for `fit`: MSE of the fast decoder's frames against `target` (what PSNR
    scores); logs `psnr` of the batch in dB."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")

    def loss_fn(model, batch, generator):
        z = batch["latents"]  # (b, c', h', w')
        want = batch["frames"] if target == "frames" else teacher.decode(z[:, None])[:, 0]
        mse = torch.nn.functional.mse_loss(model(z), want)
        return mse, {"psnr": float(10 * torch.log10(4.0 / mse.detach()))}  # range 2, 2^2
    return loss_fn


@torch.no_grad()
def decoder_scores(ae: VideoAutoencoder, fast: FastDecoder, data: LatentFrames,
                   frames: int = HELD_OUT_FRAMES, batch: int = 64) -> dict[str, float]:
    """Both decoders on the first `frames` frames of `data`, against the engine's frames:
    psnr (dB) and ssim, mean per frame, and the fast decoder's psnr against the full one's."""
    scores: dict[str, list] = {k: [] for k in ("full_psnr", "full_ssim", "fast_psnr",
                                               "fast_ssim", "fast_vs_full_psnr")}
    n = min(frames, len(data))
    for i in range(0, n, batch):
        b = data.gather(range(i, min(n, i + batch)))
        z, x = b["latents"][:, None], b["frames"][:, :3]  # (b, 1, c', h', w'), (b, 3, h, w)
        full = ae.decode(z)[:, 0, :3].float().cpu()
        mine = fast.decode(z)[:, 0, :3].float().cpu()
        for name, y in (("full", full), ("fast", mine)):
            scores[f"{name}_psnr"].append(psnr(y, x))
            scores[f"{name}_ssim"].append(ssim(y, x))
        scores["fast_vs_full_psnr"].append(psnr(mine, full))
    return {**{k: float(torch.cat(v).mean()) for k, v in scores.items()}, "frames": n}


@dataclass
class DecoderRun:
    model: FastDecoder  # trained, eval mode
    scores: dict  # held-out: see `decoder_scores`
    train_ids: list[str]
    held_ids: list[str]
    state: dict  # fit's last state


def _autoencoder(world) -> VideoAutoencoder:
    if isinstance(world, World):
        return world.ae
    return load_module(VideoAutoencoder, resolve_checkpoint(world) / "autoencoder").float()


def distill_decoder(world, store, latents, out=None, *, decoder: FastDecoder | None = None,
                    target: str = "frames", holdout: float = 0.1,
                    cfg: TrainConfig | None = None, minutes: float | None = None,
                    device: str = "auto", resume: bool = False,
                    callbacks: Iterable[Callable] = (), on_start: Callable | None = None
                    ) -> DecoderRun:
    """Train a fast decoder for `world` (a world directory or a `World`) on the latents
    (`latents`: a LatentCache or its directory) of every episode of `store` but the held-out
    last `holdout` share, which scores it against the full decoder afterwards.

    `decoder`: the network to train (default `FastDecoder.for_autoencoder`); `cfg` the
    schedule (default `decoder_train_config()`); `minutes` replaces cfg.steps by the count
    that fits. With `out`: checkpoints (resumable), `out/model`, `out/metrics.json`.
    """
    store = EpisodeStore.open(store)
    cache = latents if isinstance(latents, LatentCache) else LatentCache(latents)
    ae = _autoencoder(world).eval().requires_grad_(False)
    tc = cfg or decoder_train_config()
    fast = decoder or seeded(lambda: FastDecoder.for_autoencoder(ae), tc.seed)
    check_decoder_pair(ae, fast, "distill_decoder(decoder=...)")
    train_ids, held_ids = split_episodes(store.ids(), holdout)
    depth = ae.config.depth_channel
    data = LatentFrames(store, cache, train_ids, depth)
    acc = make_accelerator(tc, device, out)
    ae.to(acc.device)
    loss_fn = decoder_loss(target, ae)
    if minutes:
        tc = dataclasses.replace(tc, steps=steps_for_budget(fast, data, tc, loss_fn,
                                                            minutes, acc))
    if on_start is not None:
        on_start({"parameters": sum(p.numel() for p in fast.parameters()),
                  "frames": len(data), "episodes": len(train_ids), "steps": tc.steps})
    state = fit(fast, data, tc, loss_fn, callbacks=callbacks, out_dir=out, resume=resume,
                accelerator=acc)
    fast.eval()
    scores = decoder_scores(ae, fast, LatentFrames(store, cache, held_ids, depth))
    if out is not None:
        atomic_write_json(Path(out) / "metrics.json", {**scores, "target": target,
                                                       "steps": tc.steps})
    return DecoderRun(fast, scores, train_ids, held_ids, state)
