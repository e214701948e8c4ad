"""The long-horizon comparison's recipe: a world fine-tuned from another's weights with one
anti-drift method (`anti_drift`), the same budget for every method. `python -m worldlab
train long-horizon`, `experiments/long_horizon.yaml` and notebook 05 call `finetune`.

    run = wl.train.long_horizon.finetune("data/checkpoints/doom64_teacher", "error_bank",
                                         store, "runs/long/error_bank", steps=120)
    wl.train.package("data/checkpoints/doom64_teacher/autoencoder", run_dir, "runs/w_bank")
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..config import WorldConfig
from ..pretrained import load_world, resolve_checkpoint
from .recipes import WorldRun, world

# each method's config sections (on top of FINETUNE); teacher_forcing is the baseline:
# the same fine-tune with no switch
METHODS: dict[str, dict[str, dict]] = {
    "teacher_forcing": {},
    "corrupt_noise": {"train": {"context_corruption": "noise"}},
    "corrupt_blur": {"train": {"context_corruption": "blur"}},
    "corrupt_colour": {"train": {"context_corruption": "colour"}},
    "error_bank": {"train": {"context_corruption": "bank"}},
    "context_noise": {"train": {"context_noise": 0.1}, "sample": {"context_noise": 0.05}},
    "self_rollout": {"train": {"self_rollout_prob": 0.5, "self_rollout_steps": 4}},
    # contexts 8 chunks deep into its own 4-step rollout, on a quarter of the steps
    "long_rollout": {"train": {"self_rollout_prob": 0.25, "self_rollout_steps": 4,
                               "self_rollout_chunks": 8}},
}
# what every method shares: teacher forcing (the switches change the context chunks), a
# fine-tune's learning rate and warm-up, an EMA short enough for a few hundred steps
FINETUNE = {"forcing": "teacher", "lr": 1e-4, "warmup_steps": 10, "ema_decay": 0.98}


def method_config(base: WorldConfig, method: str, steps: int, batch_size: int,
                  seed: int = 0, checkpoint_every: int = 20) -> WorldConfig:
    """`base` (the starting world's config) with FINETUNE, the budget and `method`'s
    switches; validated like any config."""
    if method not in METHODS:
        raise ValueError(f"unknown long-horizon method {method!r}; expected one of "
                         f"{tuple(METHODS)}")
    return WorldConfig.from_dict(finetune_sections(base, METHODS[method], steps, batch_size,
                                                   seed, checkpoint_every))


def finetune_sections(base: WorldConfig, sections: dict, steps: int, batch_size: int,
                      seed: int, checkpoint_every: int) -> dict:
    """`base` as a dict with FINETUNE, the budget, no distillation (a flow-matching world
    again) and `sections` ({section: {field: value}}) on top: what every comparison that
    fine-tunes one world with one switch starts from."""
    d = base.to_dict()
    d["train"].update(FINETUNE, steps=steps, batch_size=batch_size, seed=seed,
                      checkpoint_every=checkpoint_every)
    d["distill"] = dataclasses.asdict(type(base.distill)())
    for section, fields in sections.items():
        d[section].update(fields)
    return d


def finetune(start, method: str, store, out=None, *, steps: int = 120, batch_size: int = 16,
             seed: int = 0, latents=None, device: str = "auto", resume: bool = False,
             callbacks=(), on_start=None) -> WorldRun:
    """Fine-tune the world directory `start` (weights, config, captions) with `method` on
    the clips of an episode store (latents of its autoencoder, default `<store>/latents`,
    encoded where missing). With `out`: resumable checkpoints, `ema/` and the rest that
    `package` assembles with `start`'s autoencoder."""
    w = load_world(resolve_checkpoint(start), device="cpu")
    cfg = method_config(w.config, method, steps, batch_size, seed)
    return world(store, cfg, out, autoencoder=Path(w.path) / "autoencoder", latents=latents,
                 captions=w.captions, init=None if resume else Path(w.path) / "world",
                 device=device, resume=resume, callbacks=callbacks, on_start=on_start)
