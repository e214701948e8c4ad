"""Train the depth head (`model.depth_head.DepthHead`) on an engine's frames and metric depth.

    run = wl.train.depth_head.train_depth_head("runs/mem/data", "runs/memory/depth_head")
    head = load_depth_head("runs/memory/depth_head/model")
    depth = head.predict(rgb)  # uint8 (n, h, w, 3) -> metres (n, h, w)

The 3D-cache memory with `memory.cache3d = "own"` fuses the world model's own frames, which
have no engine depth; this head gives it one. Its target is the engine's z-depth, `inf`
(nothing hit) and anything beyond `max_depth_m` set to `max_depth_m`; its loss is L1 on the
natural log of that depth, so a 10% error costs the same near and far, as a point cache
placing points needs. Episodes are split into train and held out (`split_episodes`), and at
most `max_frames` training frames are held in memory (whole episodes, a seeded subsample).
Training runs through `fit` (step-seeded, resumable checkpoints, callbacks); with `out`:
`out/model` (written by `fit`, what `load_depth_head` reads) and `out/metrics.json`.

Held-out scores, on `predict`'s clamped metres, over the pixels whose engine depth is finite
and below `max_depth_m` (the rest have no true distance to compare):
    abs_rel   mean |pred - true| / true
    delta1    share of pixels with max(pred / true, true / pred) < 1.25
    l1_log    mean |log pred - log target| over every pixel (the training loss)

Shape legend: n frames, b batch, h w height width.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_write_json
from ..config import TrainConfig
from ..episodes import EpisodeStore, load_frames
from ..loading import load_module
from ..model.autoencoder import frames_to_tensor
from ..model.depth_head import MIN_DEPTH_M, DepthHead
from .loop import fit, make_accelerator
from .recipes import seeded, split_episodes

MAX_TRAIN_FRAMES = 40_000  # 64 px: 0.5 GB of frames + 0.66 GB of depth in memory
MAX_HELD_FRAMES = 4_096  # held-out frames scored (whole episodes, a seeded subsample)
DELTA1 = 1.25


def depth_train_config(steps: int = 600, batch_size: int = 64, lr: float = 1e-3,
                       seed: int = 0) -> TrainConfig:
    """The TrainConfig of `train_depth_head`: a small network trained for minutes, so a
    high learning rate, a short warm-up, no weight decay and no EMA."""
    return TrainConfig(steps=steps, batch_size=batch_size, lr=lr, weight_decay=0.0,
                       warmup_steps=min(50, max(1, steps // 10)), ema_decay=0.0, seed=seed,
                       checkpoint_every=max(1, min(200, steps)))


def log_depth_target(depth, max_depth_m: float) -> torch.Tensor:
    """Engine z-depth (..., h, w), `inf` allowed -> log of it clamped to [MIN_DEPTH_M,
    max_depth_m], float32 (..., 1, h, w)."""
    d = torch.as_tensor(np.asarray(depth, np.float32))
    return d.clamp(MIN_DEPTH_M, max_depth_m).log().unsqueeze(-3)


def pick_episodes(store: EpisodeStore, ids: list[str], max_frames: int, seed: int
                  ) -> list[str]:
    """`ids` if their frames fit in `max_frames`, else a seeded subsample of whole episodes
    that does (at least one), in the order of `ids`."""
    if max_frames < 1:
        raise ValueError(f"max_frames must be >= 1, got {max_frames}")
    frames = np.array([store.index[i]["frames"] for i in ids])
    if frames.sum() <= max_frames:
        return list(ids)
    order = np.random.default_rng(seed).permutation(len(ids))
    fits = np.cumsum(frames[order]) <= max_frames
    keep = sorted(order[:max(1, int(fits.sum()))])
    return [ids[k] for k in keep]


class DepthFrames:
    """Every frame of some episodes with the engine's depth, in memory; `gather` gives a
    batch: frames (b, 3, h, w) in [-1, 1] and their log-depth target (b, 1, h, w)."""

    def __init__(self, store: EpisodeStore, ids: list[str], max_depth_m: float):
        self.rgb, self.depth = load_frames(store, ids, depth=True)  # (n, h, w, 3), (n, h, w)
        self.max_depth_m = max_depth_m

    def __len__(self) -> int:
        return len(self.rgb)

    def gather(self, indices) -> dict[str, torch.Tensor]:
        idx = np.asarray(indices)
        return {"frames": frames_to_tensor(self.rgb[idx]),
                "log_depth": log_depth_target(self.depth[idx], self.max_depth_m)}


def depth_loss(model, batch, generator):
    """loss_fn for `fit`: L1 between the predicted and the target log-depth."""
    l1 = (model(batch["frames"]) - batch["log_depth"]).abs().mean()
    return l1, {}


def depth_scores(pred: np.ndarray, true: np.ndarray, max_depth_m: float) -> dict:
    """Predicted metres (n, h, w) against engine depth (n, h, w): abs_rel and delta1 over
    the pixels with finite true depth below `max_depth_m`, l1_log over every pixel (the
    target clamped as in training); with the frame and scored pixel counts."""
    if pred.shape != true.shape:
        raise ValueError(f"predicted depth {pred.shape} and true depth {true.shape} differ "
                         f"in shape")
    valid = np.isfinite(true) & (true < max_depth_m)
    p, t = pred[valid].astype(np.float64), true[valid].astype(np.float64)
    target = np.log(np.clip(true, MIN_DEPTH_M, max_depth_m))
    return {"abs_rel": float(np.mean(np.abs(p - t) / t)) if t.size else float("nan"),
            "delta1": float(np.mean(np.maximum(p / t, t / p) < DELTA1)) if t.size
            else float("nan"),
            "l1_log": float(np.mean(np.abs(np.log(pred) - target))),
            "frames": int(len(true)), "pixels": int(valid.sum())}


@dataclass
class DepthRun:
    model: DepthHead  # trained, eval mode
    scores: dict  # on (a subsample of) the held-out episodes: see `depth_scores`
    train_ids: list[str]
    held_ids: list[str]
    state: dict  # fit's last state


def train_depth_head(store, out=None, *, steps: int = 600, batch_size: int = 64,
                     lr: float = 1e-3, holdout: float = 0.1, seed: int = 0,
                     device: str = "cpu", head: DepthHead | None = None,
                     max_frames: int = MAX_TRAIN_FRAMES, resume: bool = False,
                     callbacks: Iterable[Callable] = (), on_start: Callable | None = None
                     ) -> DepthRun:
    """Train a depth head on the engine frames and depth of `store` (a directory or an
    EpisodeStore) but its held-out last `holdout` share of episodes, which score it after.

    `head`: the network (default a seeded `DepthHead()`); at most `max_frames` training
    frames are read (whole episodes, subsampled by `seed`). With `out`: checkpoints
    (`resume=True` continues from them), `out/model` and `out/metrics.json`.
    """
    store = EpisodeStore.open(store)
    tc = depth_train_config(steps, batch_size, lr, seed)
    model = head if head is not None else seeded(DepthHead, seed)
    max_depth = float(model.config.max_depth_m)
    train_ids, held_ids = split_episodes(store.ids(), holdout)
    train_ids = pick_episodes(store, train_ids, max_frames, seed)
    data = DepthFrames(store, train_ids, max_depth)
    if on_start is not None:
        on_start({"parameters": sum(p.numel() for p in model.parameters()),
                  "frames": len(data), "episodes": len(train_ids), "steps": tc.steps})
    state = fit(model, data, tc, depth_loss, callbacks=callbacks, out_dir=out,
                resume=resume, accelerator=make_accelerator(tc, device, out))
    model, train_frames = state["model"].eval(), len(data)
    del data  # free the training frames before the held-out ones are read
    scored = pick_episodes(store, held_ids, MAX_HELD_FRAMES, seed)
    rgb, true = load_frames(store, scored, depth=True)
    scores = depth_scores(model.predict(rgb), true, max_depth)
    if out is not None:
        atomic_write_json(Path(out) / "metrics.json",
                          {**scores, "steps": tc.steps, "max_depth_m": max_depth,
                           "train_frames": train_frames, "train_episodes": len(train_ids),
                           "scored_episodes": len(scored)})
    return DepthRun(model, scores, train_ids, held_ids, state)


def load_depth_head(path) -> DepthHead:
    """A trained depth head from its save_pretrained directory (a run's `out/model`),
    safetensors only, every tensor checked (`loading.load_module`), in eval mode."""
    return load_module(DepthHead, Path(path))
