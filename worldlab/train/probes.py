"""Train the evaluation probes (`model.probes.FrameProbe`) on engine frames with the engine's
own labels, and check them on held-out engine walks before they score any generated frame.

    run = train_probes("doom", "runs/probes/doom")   # records, trains, checks, saves
    probes = load_probes("data/checkpoints/probes_doom")

Labels come from the engine, never from a person or a model:
- kinds: a character kind is in view when at least `min_pixels` (32 at 64 px, scaled with
  the frame area) of the frame's pixels belong to characters of that kind, and not in view
  when none does; frames with a sliver between are neither taught nor scored
  (`Observation.instance` and `Observation.things`: DOOM's label buffer, the procedural
  world's instance ids);
- motion: the camera's motion from frame i to frame i + gap, read from the two true poses
  (`relative_motion`): forward and strafe metres in frame i's heading, yaw and pitch
  degrees.

Walks: random starts over the engine's training maps, monsters on and the player
invulnerable (DOOM), summon prompts at `event_rate` per step so imps appear often. Held-out
walks use seeds the training walks never do. `probes.json` holds every held-out score; a
kinds probe whose balanced accuracy (mean of the true-positive and true-negative rates) is
below `ACCURACY_BAR` for a kind is marked unusable for that kind, and the events protocol
refuses to score with it; a motion control whose held-out error is above `MOTION_BAR` of
the mean-motion baseline's is not scored by camera following (`motion_usable`).

Shape legend: n frames, t frames of a walk, K kinds, h w height width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_write_json
from ..camera import heading_from_pose, wrap_degrees
from ..config import TrainConfig
from ..engines import make_engine
from ..episodes.recording import record_with
from ..loading import load_module, read_json
from ..model.autoencoder import frames_to_tensor
from ..model.probes import MOTION_FIELDS, FrameProbe
from .checkpoints import save_model_dir
from .loop import fit, make_accelerator
from .recipes import seeded

ACCURACY_BAR = 0.9  # balanced accuracy a kinds probe needs on held-out engine frames
MOTION_BAR = 0.8  # a motion probe's held-out error over the mean-motion baseline's, at most
MIN_PIXELS_64 = 32  # pixels of a kind, in a 64 px frame, for "in view" (a summoned imp
# covers ~600)
# a pair of frames whose camera turned more than this shares too little of its view for
# any probe to read the turn (DOOM's turn-around walks turn 135 degrees in 4 steps)
MAX_PAIR_YAW = 45.0
PROBE_SEED = 2_000_000  # walks of the probes: seeds no world's training data uses
ENGINE_WALKS = {  # the walks probes learn from: training maps, characters about
    "doom": {"maps": ("MAP01", "MAP02", "MAP03"), "start": "random",
             "opts": {"monsters": "invulnerable", "metric_depth": False}},
    "procedural": {"maps": None, "start": "random", "opts": {}}}


# ----------------------------------------------------------------------------------------
# Labels from the engine
# ----------------------------------------------------------------------------------------


def min_pixels(size: int) -> int:
    return max(1, round(MIN_PIXELS_64 * (size / 64) ** 2))


def kind_labels(instance: np.ndarray, things: dict[int, str], kinds: tuple[str, ...],
                pixels: int) -> np.ndarray:
    """(K,) int8: 1 when kind k covers at least `pixels` pixels of `instance` (h, w), 0
    when none, -1 in between (a sliver at a frame's edge or far away: neither taught nor
    scored)."""
    ids, counts = np.unique(instance, return_counts=True)
    area = dict.fromkeys(kinds, 0)
    for i, c in zip(ids.tolist(), counts.tolist()):
        if things.get(i) in area:
            area[things[i]] += c
    return np.array([1 if area[k] >= pixels else 0 if area[k] == 0 else -1 for k in kinds],
                    np.int8)


def relative_motion(c2w_a: np.ndarray, c2w_b: np.ndarray) -> np.ndarray:
    """Camera motion from poses (n, 4, 4) a to b: (n, 4) forward and strafe (right) metres
    in a's heading, yaw (left positive, the camera's yaw) and pitch degrees."""
    out = np.zeros((len(c2w_a), 4))
    for i, (a, b) in enumerate(zip(c2w_a, c2w_b)):
        pa, yaw_a, pitch_a = heading_from_pose(a)
        pb, yaw_b, pitch_b = heading_from_pose(b)
        d, y = pb - pa, math.radians(yaw_a)
        out[i] = (d[0] * math.cos(y) + d[1] * math.sin(y),
                  d[0] * math.sin(y) - d[1] * math.cos(y),
                  float(wrap_degrees(yaw_b - yaw_a)), pitch_b - pitch_a)
    return out


@dataclass
class LabelledWalks:
    """Engine walks with per-frame kind labels."""

    episodes: list  # Episode
    kinds: list[np.ndarray]  # per walk (t, K) int8: 1 in view, 0 not, -1 a sliver
    names: tuple[str, ...]  # the K kinds


def record_labelled(engine_name: str, seeds, frames: int, size: int, *,
                    policy: str = "mix", event_rate: float = 0.0, start: str = "player",
                    maps: tuple[str, ...] | None = None, prompts=None, progress=None,
                    **engine_opts) -> LabelledWalks:
    """One walk per seed on one engine (closed on every exit), with its kind labels;
    walk k plays maps[k % len(maps)]; `prompts` {step: text} as in `record_with`."""
    engine = make_engine(engine_name, size=size, **engine_opts)
    names = tuple(engine.character_kinds)
    episodes, kinds = [], []
    try:
        for k, seed in enumerate(seeds):
            labels = []
            on_frame = lambda i, obs: labels.append(  # noqa: E731
                kind_labels(obs.instance, obs.things, names, min_pixels(size)))
            episodes.append(record_with(engine, seed, frames, policy, event_rate, on_frame,
                                        start=start, prompts=prompts,
                                        map=None if not maps else maps[k % len(maps)]))
            kinds.append(np.stack(labels))
            if progress is not None:
                progress(1)
    finally:
        engine.close()
    return LabelledWalks(episodes, kinds, names)


def motion_pairs(episodes, gap: int, max_yaw: float = MAX_PAIR_YAW
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (frame i, frame i + gap) of the episodes whose views overlap (the camera turns
    at most `max_yaw` degrees between them): their frames (n, h, w, 3), the indices of the
    pairs' first frames (m,) into them (the second is `gap` later) and the true motion
    (m, 4)."""
    frames, first, motion, at = [], [], [], 0
    for ep in episodes:
        if len(ep) > gap:
            m = relative_motion(ep.c2w[:-gap], ep.c2w[gap:])
            keep = np.abs(m[:, 2]) <= max_yaw
            frames.append(ep.rgb)
            first.append(at + np.flatnonzero(keep))
            motion.append(m[keep])
            at += len(ep)
    if not frames:
        raise ValueError(f"no episode is longer than the motion gap {gap}")
    return np.concatenate(frames), np.concatenate(first), np.concatenate(motion)


def store_episodes(store, max_episodes: int, seed: int) -> list:
    """A seeded sample of at most `max_episodes` episodes of an episode store (a directory
    or EpisodeStore), read whole: the motion probe learns from a world's training data."""
    from ..episodes import EpisodeStore

    store = EpisodeStore.open(store)
    ids = store.ids()
    if not ids:
        raise ValueError(f"episode store {store.root} is empty")
    pick = np.random.default_rng(seed).permutation(len(ids))[:max_episodes]
    return [store.read(ids[k]) for k in sorted(pick)]


# ----------------------------------------------------------------------------------------
# Training and the held-out check
# ----------------------------------------------------------------------------------------


class ProbeData:
    """In-memory training examples: frames (n, h, w, 3), the example frames' indices into
    them (m,), for motion the gap to the second frame, and targets (m, K or 4) (divided by
    `scale`); `gather` gives a batch for the losses."""

    def __init__(self, frames: np.ndarray, index: np.ndarray, target: np.ndarray,
                 gap: int = 0, scale: np.ndarray | None = None):
        self.frames, self.index, self.gap = frames, index, gap
        self.target = target.astype(np.float32)
        if scale is not None:
            self.target = self.target / scale.astype(np.float32)

    def __len__(self) -> int:
        return len(self.index)

    def gather(self, indices) -> dict[str, torch.Tensor]:
        i = self.index[np.asarray(indices)]
        x = frames_to_tensor(self.frames[i])
        if self.gap:
            x = torch.cat([x, frames_to_tensor(self.frames[i + self.gap])], 1)
        return {"x": x, "y": torch.as_tensor(self.target[np.asarray(indices)])}


def _flip(batch: dict, generator, negate: tuple[int, ...] = ()) -> tuple:
    """Mirror a random half of the batch left-right (augmentation): kinds stay, the
    motion's strafe and yaw (`negate`) change sign."""
    x, y = batch["x"], batch["y"]
    flip = torch.rand(len(x), generator=generator) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    if negate:
        sign = torch.ones(y.shape[1])
        sign[list(negate)] = -1
        y = torch.where(flip[:, None], y * sign, y)
    return x, y


def kinds_loss(pos_weight: torch.Tensor):
    """Binary cross-entropy per kind, positives weighted by `pos_weight` (K,); slivers
    (label -1) left out."""
    def loss(model, batch, generator):
        x, y = _flip(batch, generator)
        known = (y >= 0).float()
        bce = torch.nn.functional.binary_cross_entropy_with_logits(
            model(x), y.clamp(min=0), pos_weight=pos_weight, reduction="none")
        return (bce * known).sum() / known.sum().clamp(min=1), {}
    return loss


MIRRORED = tuple(MOTION_FIELDS.index(f) for f in ("strafe", "yaw"))


def motion_loss(model, batch, generator):
    x, y = _flip(batch, generator, MIRRORED)
    return torch.nn.functional.smooth_l1_loss(model(x), y), {}


def probe_train_config(steps: int, batch_size: int, seed: int) -> TrainConfig:
    return TrainConfig(steps=steps, batch_size=batch_size, lr=2e-3, weight_decay=1e-4,
                       warmup_steps=min(50, max(1, steps // 10)), ema_decay=0.0, seed=seed,
                       checkpoint_every=max(1, steps))


def kind_scores(probs: np.ndarray, labels: np.ndarray, names: tuple[str, ...]) -> dict:
    """Per kind: accuracy, balanced accuracy, true-positive and true-negative rates at 0.5,
    the share of frames with the kind in view, and whether the probe may be used."""
    out = {}
    for k, name in enumerate(names):
        known = labels[:, k] >= 0
        said, true = probs[known, k] > 0.5, labels[known, k] == 1
        tpr = float(said[true].mean()) if true.any() else None
        tnr = float((~said[~true]).mean()) if (~true).any() else None
        balanced = float(np.mean([r for r in (tpr, tnr) if r is not None]))
        out[name] = {"accuracy": float((said == true).mean()), "balanced_accuracy": balanced,
                     "true_positive_rate": tpr, "true_negative_rate": tnr,
                     "in_view_share": float(true.mean()), "frames": int(len(true)),
                     "slivers_left_out": int((~known).sum()),
                     "usable": bool(true.any() and (~true).any() and balanced >= ACCURACY_BAR)}
    return out


def motion_scores(pred: np.ndarray, true: np.ndarray) -> dict:
    """Per motion field: mean absolute error, that of always answering the mean motion
    (what a probe that learnt nothing scores), and their ratio."""
    if len(true) == 0:
        return {name: {"mae": None, "mean_motion_mae": None, "mae_over_mean_motion": None}
                for name in MOTION_FIELDS}
    out = {}
    for k, name in enumerate(MOTION_FIELDS):
        mae = float(np.abs(pred[:, k] - true[:, k]).mean())
        base = float(np.abs(true[:, k] - true[:, k].mean()).mean())
        out[name] = {"mae": mae, "mean_motion_mae": base,
                     "mae_over_mean_motion": mae / base if base > 0 else None}
        out[name]["usable"] = motion_usable(out[name])
    return out


def motion_usable(scores: dict) -> bool:
    """A control the motion probe reads: its held-out error at most MOTION_BAR of what
    always answering the mean motion scores (a control the walks never vary, DOOM's pitch,
    or one the probe cannot see, is not scored)."""
    ratio = scores.get("mae_over_mean_motion")
    return ratio is not None and ratio <= MOTION_BAR


@dataclass
class Probes:
    kinds: FrameProbe
    motion: FrameProbe
    report: dict  # probes.json: held-out scores and settings

    def usable(self, kind: str) -> bool:
        return bool(self.report["kinds"].get(kind, {}).get("usable", False))


def _fit(model, data, tc: TrainConfig, loss, device: str):
    """A probe trains in a minute or two: no checkpoints, rerun it whole."""
    return fit(model, data, tc, loss, accelerator=make_accelerator(tc, device))["model"].eval()


def train_probes(engine: str, out=None, *, walks: int = 400, held_walks: int = 32,
                 frames: int = 64, size: int = 64, gap: int = 2, steps: int = 4000,
                 batch_size: int = 64, event_rate: float = 0.06, seed: int = 0,
                 motion_store=None, motion_episodes: int = 1200, device: str = "cpu",
                 progress=None) -> Probes:
    """Record `walks` labelled engine walks (and `held_walks` held out), train both probes,
    score them on the held-out walks; with `out`: out/kinds, out/motion, out/probes.json.

    The motion probe needs no labels but poses, so with `motion_store` (an episode store,
    e.g. the world's training data) it learns from up to `motion_episodes` of its episodes
    instead of the labelled walks: more places, less overfitting."""
    if engine not in ENGINE_WALKS:
        raise ValueError(f"no probe walks for engine {engine!r}; expected one of "
                         f"{sorted(ENGINE_WALKS)}")
    spec = ENGINE_WALKS[engine]
    rec = dict(policy="mix", event_rate=event_rate, start=spec["start"], maps=spec["maps"],
               progress=progress, **spec["opts"])
    base = PROBE_SEED + 10_000 * seed
    train = record_labelled(engine, range(base, base + walks), frames, size, **rec)
    held = record_labelled(engine, range(base + walks, base + walks + held_walks), frames,
                           size, **rec)
    names = train.names
    labels = np.concatenate(train.kinds).astype(np.float32)
    pos = (labels == 1).sum(0) / np.maximum((labels >= 0).sum(0), 1)
    pos = pos.clip(1e-3, 1)
    tc = probe_train_config(steps, batch_size, seed)
    rgb = np.concatenate([e.rgb for e in train.episodes])
    kinds = _fit(seeded(lambda: FrameProbe("kinds", names, size), seed),
                 ProbeData(rgb, np.arange(len(rgb)), labels), tc,
                 kinds_loss(torch.as_tensor(((1 - pos) / pos).clip(1, 20),
                                            dtype=torch.float32)), device)
    source = train.episodes if motion_store is None else \
        store_episodes(motion_store, motion_episodes, seed)
    motion_walks = len(source)
    pair_frames, first, m = motion_pairs(source, gap)
    scale = np.maximum(m.std(0), 1e-3)
    motion = _fit(seeded(lambda: FrameProbe("motion", MOTION_FIELDS, size,
                                            scale=tuple(float(s) for s in scale), gap=gap),
                         seed), ProbeData(pair_frames, first, m, gap, scale), tc,
                  motion_loss, device)
    del pair_frames, source
    held_rgb, held_first, held_m = motion_pairs(held.episodes, gap)
    train_sub = np.arange(0, len(rgb), 10)
    report = {"engine": engine, "size": size, "gap": gap, "min_pixels": min_pixels(size),
              "max_pair_yaw": MAX_PAIR_YAW,
              "accuracy_bar": ACCURACY_BAR, "steps": steps, "batch_size": batch_size,
              "seed": seed, "event_rate": event_rate, "walks": walks, "frames": frames,
              "held_walks": held_walks, "maps": spec["maps"],
              "seeds": [base, base + walks + held_walks],
              "motion_data": "labelled walks" if motion_store is None else
              f"{motion_walks} episodes of {motion_store}",
              "kinds": kind_scores(kinds.predict(np.concatenate([e.rgb for e in held.episodes])),
                                   np.concatenate(held.kinds), names),
              "kinds_on_training_frames": kind_scores(kinds.predict(rgb[train_sub]),
                                                      labels[train_sub].astype(np.int8), names),
              "motion": motion_scores(motion.predict(held_rgb[held_first],
                                                     held_rgb[held_first + gap]), held_m)}
    if out is not None:
        save_model_dir(kinds, Path(out) / "kinds")
        save_model_dir(motion, Path(out) / "motion")
        atomic_write_json(Path(out) / "probes.json", report)
    return Probes(kinds, motion, report)


def load_probes(path) -> Probes:
    """Probes saved by `train_probes` (safetensors, every tensor checked), in eval mode."""
    path = Path(path)
    report = read_json(path / "probes.json")
    return Probes(load_module(FrameProbe, path / "kinds"),
                  load_module(FrameProbe, path / "motion"), report)
