"""Train the peer baseline (`model.diamond.DiamondUNet`, DIAMOND-style pixel diffusion) on
an episode store.

    run = wl.train.diamond.train_diamond("runs/w2/data900", "runs/peer", minutes=45)
    peer = wl.evaluate.peer.load_peer("runs/peer/ema")

A sample is a random (episode, t) with t >= k (k = context_frames, 4): the context frames
rgb[t-k:t], the action actions[t] (the input that produced frame t) and the target rgb[t].
Every episode of the store is used, as the world model's recipe does (evaluation records
its own held-out episodes from the engine). Training runs through `fit` (step-seeded
batches, AdamW with warmup + cosine, EMA, atomic checkpoints every `checkpoint_every`
steps, resume); with `out`: `out/model` and `out/ema` (save_pretrained; `load_peer` reads
either), `out/train_plan.json` (the step count, fixed once so that a resumed `minutes` run
keeps its schedule) and `out/train_run.json` (steps, seconds, data store, threads).

Shape legend: n frames, b batch, k context frames, a action width, h w height width.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_write_json
from ..config import TrainConfig
from ..episodes import EpisodeStore
from ..loading import read_json
from ..model.autoencoder import frames_to_tensor
from ..model.diamond import DiamondConfig, DiamondUNet, diamond_loss
from ..threads import use_threads
from .loop import fit, make_accelerator, steps_for_budget
from .recipes import seeded

DEFAULT_STEPS = 2000
PLAN_FILE, RUN_FILE = "train_plan.json", "train_run.json"


def diamond_train_config(steps: int = DEFAULT_STEPS, batch_size: int = 16, lr: float = 5e-4,
                         seed: int = 0) -> TrainConfig:
    """The TrainConfig of `train_diamond`: a few thousand steps of a ~4 M-parameter U-Net,
    so a short warm-up and an EMA over the last ~500 steps."""
    return TrainConfig(steps=steps, batch_size=batch_size, lr=lr, weight_decay=0.01,
                       warmup_steps=min(100, max(1, steps // 10)), ema_decay=0.998,
                       seed=seed, checkpoint_every=max(1, min(250, steps)))


class NextFrameSamples:
    """Every (episode, t >= k) of some episodes, the frames and actions held in memory;
    `gather` gives a batch: context (b, k * 3, h, w) and target (b, 3, h, w) in [-1, 1],
    action (b, a)."""

    def __init__(self, store: EpisodeStore, ids: list[str], context_frames: int):
        rgb, actions, targets, at = [], [], [], 0
        for i in ids:
            ep = store.read(i)
            rgb.append(ep.rgb)
            actions.append(ep.actions)
            targets.append(np.arange(at + context_frames, at + len(ep)))  # global t >= k
            at += len(ep)
        self.k = context_frames
        self.targets = np.concatenate(targets) if targets else np.zeros(0, np.int64)
        if not len(self.targets):
            raise ValueError(f"no episode of {store.root} ({len(ids)} asked for) has more "
                             f"than {context_frames} frames; a sample needs {context_frames} "
                             f"context frames and a target")
        self.rgb = np.concatenate(rgb)  # (n, h, w, 3) uint8
        self.actions = np.concatenate(actions)  # (n, a) float32
        self.episodes = len(ids)

    def __len__(self) -> int:
        return len(self.targets)

    def gather(self, indices) -> dict[str, torch.Tensor]:
        t = self.targets[np.asarray(indices)]  # (b,)
        window = frames_to_tensor(self.rgb[t[:, None] + np.arange(-self.k, 1)])
        b, _, c, h, w = window.shape  # (b, k + 1, 3, h, w)
        return {"context": window[:, :self.k].reshape(b, self.k * c, h, w),
                "target": window[:, self.k], "action": torch.from_numpy(self.actions[t])}


def diamond_step_loss(model, batch, generator):
    """loss_fn for `fit`: the EDM loss of the batch's next frames."""
    return diamond_loss(model, batch["target"], batch["context"], batch["action"],
                        generator), {}


def planned_steps(out, resume: bool, steps: int | None, minutes: float | None,
                  measure: Callable[[], int]) -> int:
    """The run's step count: a resumed run's saved plan, else `steps`, else `measure()`
    (timed for `minutes`), else DEFAULT_STEPS; saved to out/train_plan.json."""
    if steps is not None and minutes is not None:
        raise ValueError(f"pass steps or minutes, not both (got steps={steps}, "
                         f"minutes={minutes})")
    plan = None if out is None else Path(out) / PLAN_FILE
    if resume and plan is not None and plan.is_file():
        saved = read_json(plan, "training plan")
        if not (isinstance(saved, dict) and isinstance(saved.get("steps"), int)
                and saved["steps"] >= 1):
            raise ValueError(f"training plan {plan} must be an object with \"steps\" >= 1")
        return saved["steps"]
    n = steps if steps is not None else measure() if minutes else DEFAULT_STEPS
    if plan is not None:
        atomic_write_json(plan, {"steps": n, "minutes": minutes})
    return n


@dataclass
class DiamondRun:
    model: DiamondUNet  # trained, eval mode
    ema: DiamondUNet | None
    steps: int
    seconds: float  # training seconds of this call (the budget probe excluded)
    state: dict  # fit's last state


def train_diamond(store, out=None, *, steps: int | None = None, minutes: float | None = None,
                  batch_size: int = 16, lr: float = 5e-4, seed: int = 0, device: str = "cpu",
                  config: DiamondConfig | None = None, threads: int | None = None,
                  resume: bool = False, callbacks: Iterable[Callable] = (),
                  on_start: Callable | None = None) -> DiamondRun:
    """Train a DIAMOND-style peer on every episode of `store` (a directory or an
    EpisodeStore) for `steps`, or as many as fit in `minutes` (timed first), or
    DEFAULT_STEPS. `config`: the network (default `DiamondConfig` at the store's frame
    size); `threads`: torch CPU threads. With `out`: checkpoints (`resume=True` continues
    from them, with the step count first planned), `out/model`, `out/ema`, train_run.json.
    """
    if threads is not None:
        use_threads(threads)
    store = EpisodeStore.open(store)
    ids = sorted(store.index)
    if not ids:
        raise ValueError(f"episode store {store.root} holds no episodes")
    h, w = store.index[ids[0]]["size"]
    if h != w:
        raise ValueError(f"DiamondUNet needs square frames; {store.root} holds {h}x{w}")
    size = int(h)
    cfg = config or DiamondConfig(size=size)
    if cfg.size != size:
        raise ValueError(f"DiamondConfig.size is {cfg.size} but {store.root} holds {size} px "
                         f"frames")
    model = seeded(lambda: DiamondUNet(**cfg.to_kwargs()), seed)
    data = NextFrameSamples(store, ids, cfg.context_frames)
    tc = diamond_train_config(batch_size=batch_size, lr=lr, seed=seed)
    acc = make_accelerator(tc, device, out)
    n = planned_steps(out, resume, steps, minutes, lambda: steps_for_budget(
        model, data, tc, diamond_step_loss, minutes, acc))
    tc = diamond_train_config(n, batch_size, lr, seed)
    if on_start is not None:
        on_start({"parameters": sum(p.numel() for p in model.parameters()),
                  "samples": len(data), "episodes": data.episodes, "steps": tc.steps})
    t0 = time.perf_counter()
    state = fit(model, data, tc, diamond_step_loss, callbacks=callbacks, out_dir=out,
                resume=resume, accelerator=acc)
    seconds = time.perf_counter() - t0
    if out is not None:
        atomic_write_json(Path(out) / RUN_FILE, {
            "steps": tc.steps, "seconds": seconds, "data": str(store.root),
            "episodes": data.episodes, "samples": len(data), "threads": torch.get_num_threads(),
            "device": str(acc.device), "batch_size": batch_size, "lr": lr, "seed": seed,
            "minutes": minutes, "resumed": resume,
            "parameters": sum(p.numel() for p in model.parameters())})
    ema = state["ema"].eval() if state["ema"] is not None else None
    return DiamondRun(state["model"].eval(), ema, tc.steps, seconds, state)
