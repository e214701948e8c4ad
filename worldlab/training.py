"""Training: the flow-matching loss, `fit()`, and the `train` command.

`fit` knows nothing about the world model: it takes a map-style dataset and a
`loss_fn(model, batch, generator) -> (loss, logs)`, and runs AdamW with warmup + cosine decay,
gradient clipping, an EMA copy, atomic checkpoints (`checkpoints.py`) and resume, all through
`accelerate.Accelerator` (one CPU, one GPU, or `accelerate launch` over many; bf16 autocast
when `mixed_precision="bf16"`). The autoencoder trains through the same loop.

Determinism: step s draws its batch indices and all its noise from generators seeded with
(seed, s, rank), and the learning rate is a pure function of s, so a run resumed from a
checkpoint is bit-identical on CPU to one that never stopped. `batch_size` is per process.

Flow convention (rectified flow): x_t = (1 - t) x0 + t noise, target velocity v = noise - x0,
t = 0 is clean. The time of each chunk is drawn logit-normal (t = sigmoid(N(0, 1)), as in
Stable Diffusion 3: most samples at mid noise where the velocity is hardest) or uniform.

Shape legend: b batch, t time (frames), n chunks, c channels, h w height width, a action
width, k text tokens (scene / character / event), e text width.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .atomic import atomic_write_text
from .checkpoints import (latest_checkpoint, load_checkpoint, load_weights, save_checkpoint,
                          save_model_dir)
from .config import TrainConfig
from .textenc import CaptionTable

FORCINGS = ("teacher", "diffusion")
TIME_SCHEDULES = ("logit_normal", "uniform")
_DATA_STREAM, _NOISE_STREAM = 0, 1

# ----------------------------------------------------------------------------------------
# Seeds and schedules: pure functions of the step
# ----------------------------------------------------------------------------------------


def step_generator(seed: int, step: int, rank: int = 0, stream: int = _NOISE_STREAM):
    """A CPU torch.Generator seeded from (seed, step, rank, stream) and nothing else."""
    state = np.random.SeedSequence([seed, step, rank, stream]).generate_state(2, np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup over `warmup_steps`, then cosine decay to 10% of `lr` at `steps`."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


class StepBatchSampler(torch.utils.data.Sampler):
    """Batches of `batch_size` indices (with replacement) for steps [start, stop), seeded by step."""

    def __init__(self, n: int, batch_size: int, seed: int, start: int, stop: int,
                 rank: int = 0):
        if n < 1:
            raise ValueError("the dataset is empty (0 items); expected at least 1")
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.start, self.stop, self.rank = start, stop, rank

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def __iter__(self):
        for step in range(self.start, self.stop):
            g = step_generator(self.seed, step, self.rank, _DATA_STREAM)
            yield torch.randint(self.n, (self.batch_size,), generator=g).tolist()


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
                schedule: str = "logit_normal") -> tuple[torch.Tensor, torch.Tensor]:
    """Per-chunk flow time (b, n) and loss mask (b, n) for a forcing mode.

    teacher: the context chunks are clean (t = 0, no loss) and only the last chunk is noised,
    as at sampling time. diffusion: every chunk gets its own time and all carry loss, so the
    model learns to denoise any chunk given a noisy past (Diffusion Forcing).
    """
    if forcing == "teacher":
        t = torch.zeros(b, n)
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
                       actions=None, c2w=None, text=None) -> tuple[torch.Tensor, dict]:
    """Rectified-flow velocity loss on latents (b, t, c, h, w); returns (loss, logs).

    Conditions are passed through to the model: actions (b, t, a), c2w (b, t, 4, 4),
    text (b, n, k, e). Each chunk's caption is dropped with probability `text_dropout`
    (`text_drop` (b, n)), which is what classifier-free guidance needs at sampling time.
    """
    b, t_len = latents.shape[:2]
    if latents.dim() != 5 or t_len % chunk_frames:
        raise ValueError(f"latents must be (b, t, c, h, w) with t a multiple of chunk_frames "
                         f"({chunk_frames}), got {tuple(latents.shape)}")
    n, dev = t_len // chunk_frames, latents.device
    t, mask = chunk_times(b, n, forcing, generator, schedule)  # (b, n) each, on the CPU
    t, mask = t.to(dev), mask.to(dev)
    noise = torch.randn(latents.shape, generator=generator).to(dev, latents.dtype)
    t_frames = t.repeat_interleave(chunk_frames, dim=1).to(latents.dtype)  # (b, t)
    tf = t_frames[:, :, None, None, None]
    x_t = (1 - tf) * latents + tf * noise  # (b, t, c, h, w)
    text_drop = (torch.rand(b, n, generator=generator) < text_dropout).to(dev)
    v = model(x_t, t, actions=actions, c2w=c2w, text=text, text_drop=text_drop)
    v = getattr(v, "sample", v)  # (b, t, c, h, w)
    err = (v.float() - (noise - latents).float()).pow(2)
    per_chunk = err.unflatten(1, (n, chunk_frames)).flatten(2).mean(-1)  # (b, n)
    loss = (per_chunk * mask).sum() / mask.sum()
    return loss, {"t_mean": float((t * mask).sum() / mask.sum())}


def world_model_loss(cfg: TrainConfig, chunk_frames: int, captions: CaptionTable | None):
    """loss_fn(model, batch, generator) for `fit` on EpisodeClips batches with `latents`."""
    def loss_fn(model, batch: dict, generator: torch.Generator):
        lat = batch["latents"].float()  # (b, t, c, h, w)
        text = None
        if captions is not None:
            text = captions.embed(batch["captions"]).to(lat.device)  # (b, n, 3, e)
        return flow_matching_loss(
            model, lat, chunk_frames=chunk_frames, generator=generator, forcing=cfg.forcing,
            schedule=cfg.time_schedule, text_dropout=cfg.text_dropout,
            actions=batch["actions"].float(), c2w=batch["c2w"].float(), text=text)
    return loss_fn


# ----------------------------------------------------------------------------------------
# The loop
# ----------------------------------------------------------------------------------------


def make_accelerator(cfg: TrainConfig, device: str = "auto"):
    """An Accelerator for `device` ("auto" | "cpu" | "cuda"); bf16 autocast only on a GPU."""
    from accelerate import Accelerator

    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}; expected 'auto', 'cpu' or 'cuda'")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but torch sees no CUDA device")
    cpu = device == "cpu" or not torch.cuda.is_available()
    mp = cfg.mixed_precision if not cpu else "no"
    if not cpu:  # TF32 matmuls: float32 training at tensor-core speed (10-bit mantissa)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return Accelerator(cpu=cpu, mixed_precision=mp)


def _to_device(batch: Any, device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch


@torch.no_grad()
def ema_update(ema, model, decay: float) -> None:
    for pe, pm in zip(ema.parameters(), model.parameters()):
        pe.lerp_(pm.detach().to(pe.dtype), 1.0 - decay)


def _check_train_config(cfg: TrainConfig) -> None:
    for name in ("steps", "batch_size", "checkpoint_every"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"TrainConfig.{name} must be >= 1, got {getattr(cfg, name)}")
    if not 0.0 <= cfg.ema_decay < 1.0:
        raise ValueError(f"TrainConfig.ema_decay must be in [0, 1), got {cfg.ema_decay}")


def _restore(out_dir, resume: bool, model, optimizer, ema) -> int:
    """Load the latest checkpoint under out_dir if resuming; return the step to start at."""
    if not resume:
        return 0
    if out_dir is None:
        raise ValueError("resume=True needs out_dir (where the checkpoints are)")
    ckpt = latest_checkpoint(Path(out_dir))
    return 0 if ckpt is None else load_checkpoint(ckpt, model, optimizer, ema)["step"]


def fit(model, dataset, cfg: TrainConfig, loss_fn: Callable, callbacks: Iterable[Callable] = (),
        out_dir=None, resume: bool = False, accelerator=None, collate_fn=None,
        num_workers: int = 0) -> dict[str, Any]:
    """Train `model` on `dataset` for cfg.steps steps; returns the last step's state.

    Every step calls each callback (on the main process) with dict(step, loss, lr, grad_norm,
    + the loss_fn's logs). With `out_dir`, checkpoints go to out_dir/checkpoints every
    `checkpoint_every` steps and at the end, the final weights to out_dir/model and
    out_dir/ema. `resume=True` continues from the newest checkpoint there (from scratch if
    there is none). The returned state also holds `model` and `ema` (None if ema_decay = 0).
    """
    _check_train_config(cfg)
    acc = accelerator or make_accelerator(cfg)
    model = model.to(acc.device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    wrapped, opt = acc.prepare(model, opt)  # DDP broadcasts rank 0's weights here
    ema = copy.deepcopy(model).requires_grad_(False) if cfg.ema_decay > 0 else None
    start = _restore(out_dir, resume, model, opt, ema)
    loader = torch.utils.data.DataLoader(
        dataset, batch_sampler=StepBatchSampler(len(dataset), cfg.batch_size, cfg.seed, start,
                                                cfg.steps, acc.process_index),
        collate_fn=collate_fn, num_workers=num_workers)
    state: dict[str, Any] = {"step": start}
    wrapped.train()
    for step, batch in zip(range(start, cfg.steps), loader):
        state = _train_step(wrapped, model, ema, opt, acc, loss_fn, cfg, step, batch)
        done = step + 1
        if out_dir is not None and (done % cfg.checkpoint_every == 0 or done == cfg.steps):
            _save(acc, out_dir, done, model, opt, ema, cfg)
        if acc.is_main_process:
            for cb in callbacks:
                cb(state)
    if out_dir is not None and acc.is_main_process:
        save_model_dir(model, Path(out_dir) / "model")
        if ema is not None:
            save_model_dir(ema, Path(out_dir) / "ema")
    acc.wait_for_everyone()
    return {**state, "model": model, "ema": ema}


def steps_for_budget(model, dataset, cfg: TrainConfig, loss_fn: Callable, minutes: float,
                     accelerator=None, collate_fn=None, probe_steps: int = 20) -> int:
    """How many steps of `fit` fit in `minutes`, timed on a throwaway copy of the model.

    The schedule (warmup, cosine) is a function of cfg.steps, so a wall-clock budget is
    turned into a step count up front rather than by stopping a run half-way down its
    schedule. The first 3 probe steps are not timed (allocation, kernel selection).
    """
    if not minutes > 0:
        raise ValueError(f"minutes must be positive, got {minutes!r}")
    probe = copy.deepcopy(model)
    ticks: list[float] = []
    fit(probe, dataset, dataclasses.replace(cfg, steps=probe_steps + 3, ema_decay=0.0),
        loss_fn, callbacks=[lambda state: ticks.append(time.perf_counter())],
        accelerator=accelerator, collate_fn=collate_fn)
    per_step = (ticks[-1] - ticks[2]) / (len(ticks) - 3)
    del probe
    return max(1, int(minutes * 60 / per_step))


def _train_step(wrapped, model, ema, opt, acc, loss_fn, cfg: TrainConfig, step: int,
                batch) -> dict[str, Any]:
    lr = lr_at(step, cfg)
    for group in opt.param_groups:
        group["lr"] = lr
    batch = _to_device(batch, acc.device)
    g = step_generator(cfg.seed, step, acc.process_index, _NOISE_STREAM)
    with acc.autocast():
        loss, logs = loss_fn(wrapped, batch, g)
    acc.backward(loss)
    grad_norm = acc.clip_grad_norm_(wrapped.parameters(), cfg.grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    if ema is not None:
        ema_update(ema, model, cfg.ema_decay)
    return {"step": step + 1, "loss": float(loss.detach()), "lr": lr,
            "grad_norm": float(grad_norm), **logs}


def _save(acc, out_dir, step: int, model, opt, ema, cfg: TrainConfig) -> None:
    acc.wait_for_everyone()  # every rank has finished the step: the weights are final
    if acc.is_main_process:
        extra = {"train_config": vars(cfg), "world_size": acc.num_processes}
        save_checkpoint(Path(out_dir), step, model, opt, ema, extra, keep=cfg.keep_checkpoints)
    acc.wait_for_everyone()


# ----------------------------------------------------------------------------------------
# `python -m worldlab train autoencoder|world ...`
# ----------------------------------------------------------------------------------------


def configure_cli(parser) -> None:
    sub = parser.add_subparsers(dest="what", metavar="what", required=True)
    for name, help_, func in (("autoencoder", "train the video autoencoder", _cli_autoencoder),
                              ("world", "train the world model on cached latents", _cli_world)):
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--preset", default="small", help="config preset (tiny|small|base|large)")
        p.add_argument("--data", required=True, help="episode store directory")
        p.add_argument("--out", required=True, help="output directory (checkpoints, model)")
        p.add_argument("--steps", type=int, default=None, help="override the preset's steps")
        p.add_argument("--resume", action="store_true", help="continue from --out's checkpoint")
        p.add_argument("--device", default="auto", help="auto | cpu | cuda")
        p.add_argument("--batch-size", type=int, default=None, help="override the preset's")
        p.add_argument("--set", action="append", default=[], metavar="SECTION__FIELD=VALUE",
                       help="config override, e.g. --set model__patch_size=2 (repeatable)")
        p.add_argument("--minutes", type=float, default=None,
                       help="wall-clock budget: the step count is timed to fit it "
                            "(replaces --steps)")
        p.set_defaults(func=func)
        if name == "autoencoder":
            p.add_argument("--holdout", type=float, default=0.1,
                           help="fraction of episodes held out for PSNR/SSIM")
        else:
            p.add_argument("--autoencoder", default=None,
                           help="autoencoder directory (needed to fill the latent cache)")
            p.add_argument("--latents", default=None, help="latent cache (default <data>/latents)")
            p.add_argument("--no-text", action="store_true", help="train without captions")
            p.add_argument("--init", default=None, metavar="DIR",
                           help="start from these weights (a save_pretrained directory, e.g. "
                                "runs/world/ema) with a fresh schedule; its context window "
                                "may differ from the new one")
            p.add_argument("--captions", default=None,
                           help="caption table (safetensors) to start from; the table used "
                                "is saved as <out>/captions.safetensors")
    _add_package_cli(sub)


def _add_package_cli(sub) -> None:
    p = sub.add_parser("package", help="assemble a world directory from training outputs",
                       description="autoencoder + world model + config (+ captions) -> one "
                                   "directory that pretrained.load_world reads")
    p.add_argument("--autoencoder", required=True, help="e.g. runs/ae/model")
    p.add_argument("--world", required=True, help="world run directory, e.g. runs/world")
    p.add_argument("--weights", default="ema", help="subfolder of --world: ema | model")
    p.add_argument("--out", required=True, help="e.g. data/checkpoints/doom64")
    p.add_argument("--full", action="store_true", help="keep float32 (default: float16)")
    p.set_defaults(func=_cli_package)


def _cli_package(args) -> int:
    from .pretrained import package_world

    run = Path(args.world)
    captions = run / "captions.safetensors"
    out = package_world(args.autoencoder, run / args.weights, run / "world_config.json",
                        args.out, captions if captions.exists() else None, half=not args.full)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"packaged {out} ({size / 2**20:.1f} MiB)")
    return 0


def _progress(total: int):
    """A tqdm callback: the only progress bar of training lives here, in the front-end."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, unit="step")

    def cb(state: dict) -> None:
        if bar.n == 0 and state["step"] > 1:  # resumed: rate and ETA from here, not step 0
            bar.reset(total)
            bar.initial = bar.n = state["step"] - 1
        bar.n = state["step"]
        bar.set_postfix(loss=f"{state['loss']:.4f}", lr=f"{state['lr']:.2e}", refresh=False)
        bar.refresh()
    return bar, cb


def _split_episodes(ids: list[str], holdout: float) -> tuple[list[str], list[str]]:
    if not 0.0 < holdout < 1.0:
        raise ValueError(f"--holdout must be in (0, 1), got {holdout}")
    if len(ids) < 2:
        raise ValueError(f"need at least 2 episodes to hold one out, the store has {len(ids)}")
    k = min(len(ids) - 1, max(1, round(holdout * len(ids))))
    return ids[:-k], ids[-k:]


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """["model__width=128", "train__forcing=teacher"] -> {"model__width": 128, ...}.

    Values are Python literals when they parse as one, else strings; make_config then
    rejects unknown keys by name.
    """
    import ast

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or "__" not in key:
            raise ValueError(f"--set expects SECTION__FIELD=VALUE, got {pair!r}")
        try:
            out[key.strip()] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key.strip()] = value
    return out


def _cli_autoencoder(args) -> int:
    import json

    from . import autoencoder as A
    from .config import make_config
    from .episodes import EpisodeStore

    cfg = make_config(args.preset, **parse_overrides(args.set)).autoencoder
    if args.steps is not None:
        cfg.steps = args.steps
    if args.batch_size is not None:
        cfg.batch_size = args.batch_size
    store = EpisodeStore(args.data)
    train_ids, held_ids = _split_episodes(store.ids(), args.holdout)
    rgb, depth = A.load_frames(store, train_ids, cfg.depth_channel)
    ae = A.VideoAutoencoder.from_config_dataclass(cfg)
    tc = A.autoencoder_train_config(cfg)
    acc = make_accelerator(tc, args.device)
    if args.minutes:
        tc = A.autoencoder_train_config(cfg, steps=steps_for_budget(
            ae, A.FrameDataset(rgb, depth), tc, A.autoencoder_loss(cfg), args.minutes, acc))
    print(f"autoencoder: {sum(p.numel() for p in ae.parameters()):,} parameters, "
          f"{len(rgb)} training frames from {len(train_ids)} episodes, {tc.steps} steps")
    bar, cb = _progress(tc.steps)
    A.train_autoencoder(ae, rgb, cfg, depth=depth, train=tc, callbacks=[cb], out_dir=args.out,
                        resume=args.resume, accelerator=acc)
    bar.close()
    ae.eval()
    A.fit_latent_scale(ae, A.frames_to_tensor(rgb[:2048], None if depth is None
                                               else depth[:2048]))
    save_model_dir(ae, Path(args.out) / "model")
    held_rgb, held_depth = A.load_frames(store, held_ids, cfg.depth_channel)
    scores = A.evaluate_autoencoder(ae, A.frames_to_tensor(
        held_rgb[:1024], None if held_depth is None else held_depth[:1024]))
    atomic_write_text(Path(args.out) / "metrics.json", json.dumps(scores, indent=2))
    print(f"held-out ({len(held_ids)} episodes): PSNR {scores['psnr']:.2f} dB, "
          f"SSIM {scores['ssim']:.4f}")
    return 0


def _cli_world(args) -> int:
    from .autoencoder import VideoAutoencoder, encode_store
    from .config import make_config
    from .episodes import EpisodeClips, EpisodeStore, LatentCache, collate_clips
    from .model.dit import WorldModel

    cfg = make_config(args.preset, **parse_overrides(args.set))
    if args.steps is not None:
        cfg.train.steps = args.steps
    if args.batch_size is not None:
        cfg.train.batch_size = args.batch_size
    store = EpisodeStore(args.data)
    acc = make_accelerator(cfg.train, args.device)
    cache = LatentCache(args.latents or Path(args.data) / "latents")
    if not all(cache.has(i) for i in store.ids()):
        if args.autoencoder is None:
            raise ValueError(f"the latent cache {cache.root} is incomplete; pass "
                             f"--autoencoder DIR to fill it")
        ae = VideoAutoencoder.from_pretrained(args.autoencoder).to(acc.device).eval()
        n = encode_store(ae, store, cache)
        print(f"encoded {n} episodes into {cache.root}")
    sample = cache.get(store.ids()[0])  # (t, c, h', w')
    model = WorldModel.from_config_dataclass(cfg.model, sample.shape[1], sample.shape[-1])
    if args.init is not None:
        if args.resume:
            raise ValueError("--init starts a new run and --resume continues one; pass one")
        load_weights(model, Path(args.init), ignore=("window_chunks",))  # no weight uses it
    cf = cfg.model.chunk_frames
    clips = EpisodeClips(store, clip_frames=cf * cfg.data.clip_chunks, chunk_frames=cf,
                         stride=cf, latents=cache, cache_episodes=len(store.ids()))
    captions = None if args.no_text else (
        CaptionTable.load(args.captions) if args.captions else CaptionTable())
    loss_fn = world_model_loss(cfg.train, cf, captions)
    if args.minutes:
        clips.preload()  # else the timed probe steps would be reading episodes from disk
        cfg.train.steps = steps_for_budget(model, clips, cfg.train, loss_fn, args.minutes, acc,
                                           collate_fn=collate_clips)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "world_config.json", cfg.to_json())
    print(f"world model: {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"{len(clips)} clips, {cfg.train.steps} steps")
    bar, cb = _progress(cfg.train.steps)
    state = fit(model, clips, cfg.train, loss_fn, callbacks=[cb], out_dir=out,
                resume=args.resume, collate_fn=collate_clips, accelerator=acc)
    bar.close()
    if captions is not None:
        captions.save(out / "captions.safetensors")
    print(f"step {state['step']}: loss {state.get('loss', float('nan')):.4f}; saved {out}")
    return 0
