"""The training loop: `fit()`, its step-seeded batches and schedule, and budgets.

`fit` knows nothing about the world model: it takes a dataset and a
`loss_fn(model, batch, generator) -> (loss, logs)`, and runs AdamW with warmup + cosine decay,
gradient clipping, an EMA copy, atomic checkpoints (`checkpoints.py`) and resume, all through
`accelerate.Accelerator` (one CPU, one GPU, or `accelerate launch` over many with DDP or
FSDP, see `sharding.py`; bf16 autocast when `mixed_precision="bf16"`, torch.compile when
`compile`, gradient checkpointing when `grad_checkpointing`). The autoencoder trains
through the same loop.

Data: a dataset with `gather(indices) -> batch` (`episodes.ClipTensors`: tensors already on
the device) is indexed once per step; any other map-style dataset goes through a
DataLoader (`collate_fn`, `num_workers`). Each step's state reports `data_s`, the seconds
the step waited for its batch.

Determinism: step s draws its batch indices and all its noise from generators seeded with
(seed, s, rank), and the learning rate is a pure function of s, so a run resumed from a
checkpoint is bit-identical on CPU to one that never stopped. `batch_size` is per process.

Tracking: an accelerator made with `out` (`make_accelerator(cfg, device, out)`, as every
recipe does) and cfg.tensorboard carries accelerate's TensorBoard tracker; `fit` with an
out_dir starts it, logs each step's scalars (the callbacks' state) to out/tensorboard and
closes it, also when a step fails. A resumed run purges the events after its checkpoint.

The losses live in `losses.py`, the recipes that call `fit` in `recipes.py`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config import TrainConfig
from .checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint, save_model_dir
from .sharding import (Unsharded, broadcast_from_main, clip_grad_norm, full_optimizer_state,
                       sharded_copy, uses_fsdp)

_DATA_STREAM, _NOISE_STREAM = 0, 1
TENSORBOARD_DIR = "tensorboard"  # under a run's out dir, so `--logdir runs/` finds each run

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
    """Batches of `batch_size` indices (with replacement) for steps [start, stop), seeded by
    step."""

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
# The loop
# ----------------------------------------------------------------------------------------


def make_accelerator(cfg: TrainConfig, device: str = "auto", out=None):
    """An Accelerator for `device` ("auto" | "cpu" | "cuda"); bf16 autocast only on a GPU.
    With `out` (the run's directory) and cfg.tensorboard, it logs to TensorBoard under out."""
    from accelerate import Accelerator

    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}; expected 'auto', 'cpu' or 'cuda'")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but torch sees no CUDA device")
    cpu = device == "cpu" or not torch.cuda.is_available()
    mp = cfg.mixed_precision if not cpu else "no"
    if not cpu:  # TF32 matmuls: float32 training at tensor-core speed (10-bit mantissa)
        _check_launch()
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return Accelerator(cpu=cpu, mixed_precision=mp, **_tracking(cfg, out))


def _tracking(cfg: TrainConfig, out) -> dict:
    """The Accelerator arguments that log to TensorBoard under `out`: none without `out` or
    with cfg.tensorboard off."""
    from accelerate.utils import is_tensorboard_available

    if out is None or not cfg.tensorboard:
        return {}
    if not is_tensorboard_available():  # accelerate would drop the tracker without a word
        raise ImportError("train.tensorboard=True needs the tensorboard package (a worldlab "
                          "dependency: pip install tensorboard), or set it False")
    return {"log_with": "tensorboard", "project_dir": str(out)}


def _check_launch() -> None:
    """A launcher that starts more processes on this machine than it has GPUs fails here,
    named, rather than in CUDA's "invalid device ordinal"."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if local > torch.cuda.device_count():
        raise ValueError(f"the launcher started {local} processes on this machine "
                         f"(LOCAL_WORLD_SIZE) but torch sees {torch.cuda.device_count()} "
                         f"CUDA device(s); set num_processes in the accelerate config to at "
                         f"most the GPUs per machine")


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


def _batches(dataset, sampler, collate_fn, num_workers: int, device):
    """The batches of `sampler`'s steps on `device`: gathered by index where the dataset
    holds tensors (`gather`), else read item by item through a DataLoader."""
    if hasattr(dataset, "gather"):
        return (_to_device(dataset.gather(indices), device) for indices in sampler)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler,
                                         collate_fn=collate_fn, num_workers=num_workers)
    return (_to_device(batch, device) for batch in loader)


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
        num_workers: int = 0, samples: Callable | None = None) -> dict[str, Any]:
    """Train `model` on `dataset` for cfg.steps steps; returns the last step's state.

    Every step calls each callback (on the main process) with dict(step, loss, lr, grad_norm,
    data_s, + the loss_fn's logs). With `out_dir`, checkpoints go to out_dir/checkpoints
    every `checkpoint_every` steps and at the end, the final weights to out_dir/model and
    out_dir/ema, and the accelerator's trackers (out_dir/tensorboard by default) get the
    same scalars, and `samples(weights) -> uint8 (h, w, 3)` (see `train.samples`) drawn at
    every checkpoint as the image "samples". `resume=True` continues from the newest
    checkpoint there (from scratch if there is none). The returned state also holds `model` and `ema` (None if ema_decay = 0),
    unsharded (under FSDP: copies holding the gathered weights).
    """
    _check_train_config(cfg)
    acc = accelerator or make_accelerator(cfg, out=out_dir)
    run = _Run(model, cfg, acc)
    start = _restore(out_dir, resume, run.model, run.opt, run.ema)
    sampler = StepBatchSampler(len(dataset), cfg.batch_size, cfg.seed, start, cfg.steps,
                               acc.process_index)
    batches = _batches(dataset, sampler, collate_fn, num_workers, acc.device)
    state: dict[str, Any] = {"step": start}
    run.wrapped.train()
    tracked = _start_tracking(acc, out_dir, start)
    try:
        for step in range(start, cfg.steps):
            t0 = time.perf_counter()
            batch = next(batches)
            waited = time.perf_counter() - t0
            state = {**_train_step(run, acc, loss_fn, cfg, step, batch), "data_s": waited}
            done = step + 1
            if out_dir is not None and (done % cfg.checkpoint_every == 0 or done == cfg.steps):
                _save(acc, out_dir, done, run, cfg)
                if tracked and samples is not None:
                    _log_samples(acc, run, samples, done)
            if tracked:  # before the callbacks: a step a callback stops at is logged too
                acc.log(_scalars(state), step=done)
            if acc.is_main_process:
                for cb in callbacks:
                    cb(state)
    finally:
        if tracked:
            _end_tracking(acc)
    model, ema = run.weights()
    if out_dir is not None and acc.is_main_process:
        save_model_dir(model, Path(out_dir) / "model")
        if ema is not None:
            save_model_dir(ema, Path(out_dir) / "ema")
    acc.wait_for_everyone()
    return {**state, "model": model, "ema": ema}


# ----------------------------------------------------------------------------------------
# Tracking: accelerate's trackers (TensorBoard by default, see make_accelerator)
# ----------------------------------------------------------------------------------------


def _start_tracking(acc, out_dir, start: int) -> bool:
    """Start the accelerator's trackers for a run with an out_dir; whether fit logs to them.
    Events at or after step start + 1 left by an earlier try of this run are purged
    (TensorBoard drops them on reading), so a resumed run shows one curve."""
    if out_dir is None or not acc.log_with or acc.trackers:  # trackers the caller started
        return False  # are the caller's to log to (through the callbacks) and to close
    acc.init_trackers(TENSORBOARD_DIR, init_kwargs={
        "tensorboard": {"purge_step": start + 1, "flush_secs": 30}})
    return True


def _end_tracking(acc) -> None:
    """Close the trackers `_start_tracking` started (their files flushed, writer threads
    ended). Not `acc.end_training()`: it also destroys the process group, which the end of
    fit and a caller under DDP still use."""
    for tracker in acc.trackers:
        tracker.finish()
    acc.trackers.clear()  # the accelerator may serve another fit


def _log_samples(acc, run, samples: Callable, step: int) -> None:
    """The image `samples` draws from the weights (the EMA's when kept), logged at `step`;
    the trained model is put back in train mode. Not under FSDP (the weights are shards)."""
    if run.sharded or not acc.is_main_process:
        return
    weights = run.ema if run.ema is not None else run.model
    was = weights.training
    weights.eval()
    try:
        image = samples(weights)  # (h, w, 3) uint8
    finally:
        weights.train(was)
    for tracker in acc.trackers:
        if tracker.name == "tensorboard":
            tracker.log_images({"samples": image[None]}, step=step, dataformats="NHWC")


def _scalars(state: dict[str, Any]) -> dict[str, float]:
    """The numbers of a step's state as tracker scalars: "train/<key>", the step aside."""
    return {f"train/{k}": float(v) for k, v in state.items()
            if k != "step" and isinstance(v, (int, float))}


class _Run:
    """What `fit` trains: the model, what the loss calls (`wrapped`: DDP, FSDP or compiled),
    the optimizer and the EMA, prepared by the accelerator."""

    def __init__(self, model, cfg: TrainConfig, acc):
        self.sharded = uses_fsdp(acc)
        if cfg.grad_checkpointing:
            model.enable_gradient_checkpointing()  # diffusers; a clear error if unsupported
        model = model.to(acc.device)
        keep_ema = cfg.ema_decay > 0
        self.unsharded = ema = None
        if self.sharded:  # an FSDP module cannot be copied: copy it before it is sharded
            if acc.num_processes > 1:
                broadcast_from_main(model)
            self.unsharded = Unsharded(model, keep_ema)
            ema = copy.deepcopy(model) if keep_ema else None
        opt = torch.optim.AdamW(param_groups(model, cfg), lr=cfg.lr,
                                weight_decay=cfg.weight_decay)
        self.wrapped, self.opt = acc.prepare(model, opt)  # DDP broadcasts rank 0's weights
        self.model = model  # FSDP2 shards in place: `model` holds this rank's shards
        if cfg.compile:  # here, not through accelerate: its dynamo setting is per process
            self.wrapped = torch.compile(self.wrapped)
        if keep_ema:
            ema = sharded_copy(ema, model) if self.sharded else copy.deepcopy(model)
        self.ema = None if ema is None else ema.requires_grad_(False)

    def weights(self):
        """(model, ema) with full weights; under FSDP a collective that every rank calls."""
        if not self.sharded:
            return self.model, self.ema
        return self.unsharded.load(self.model, self.ema)


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


def param_groups(model, cfg: TrainConfig) -> list[dict]:
    """The optimizer's parameter groups: one, or with cfg.memory_lr_scale != 1 a second for
    the memory parameters (names with "memory": new in a memory fine-tune, starting at zero
    effect, they learn at `lr_scale` times the schedule's rate)."""
    if cfg.memory_lr_scale == 1.0:
        return [{"params": list(model.parameters())}]
    named = list(model.named_parameters())
    memory = [p for n, p in named if "memory" in n]
    rest = [{"params": [p for n, p in named if "memory" not in n]}]
    return rest + ([{"params": memory, "lr_scale": cfg.memory_lr_scale}] if memory else [])


def _train_step(run: _Run, acc, loss_fn, cfg: TrainConfig, step: int, batch
                ) -> dict[str, Any]:
    lr = lr_at(step, cfg)
    for group in run.opt.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
    g = step_generator(cfg.seed, step, acc.process_index, _NOISE_STREAM)
    with acc.autocast():
        loss, logs = loss_fn(run.wrapped, batch, g)
    acc.backward(loss)
    grad_norm = clip_grad_norm(run.model.parameters(), cfg.grad_clip) if run.sharded else \
        acc.clip_grad_norm_(run.wrapped.parameters(), cfg.grad_clip)
    run.opt.step()
    run.opt.zero_grad(set_to_none=True)
    if run.ema is not None:
        ema_update(run.ema, run.model, cfg.ema_decay)
    return {"step": step + 1, "loss": float(loss.detach()), "lr": lr,
            "grad_norm": float(grad_norm), **logs}


def _save(acc, out_dir, step: int, run: _Run, cfg: TrainConfig) -> None:
    acc.wait_for_everyone()  # every rank has finished the step: the weights are final
    model, ema = run.weights()
    opt = full_optimizer_state(run.opt) if run.sharded else run.opt
    if acc.is_main_process:
        extra = {"train_config": vars(cfg), "world_size": acc.num_processes}
        save_checkpoint(Path(out_dir), step, model, opt, ema, extra, keep=cfg.keep_checkpoints)
    acc.wait_for_everyone()
