"""Training checkpoints: atomic directories of safetensors + JSON, nothing pickled.

    <out>/checkpoints/step_00000500/
        model/            save_pretrained: config.json + diffusion_pytorch_model.safetensors
        ema/              the same for the EMA copy (absent when EMA is off)
        optimizer.safetensors   optimizer tensors, keys "state.<param index>.<name>",
                                plus "rng.torch" (the global torch RNG state)
        trainer_state.json      step, optimizer param_groups, the TrainConfig, world size

A checkpoint is written into a hidden temporary directory next to its final place and
renamed into place (`os.replace`), so a crash mid-save leaves the previous checkpoints as
they were and never a half-written `step_*`. The learning-rate schedule is a pure function
of the step (see `loop.lr_at`), and data order and noise are seeded from (seed, step,
rank), so the step is all the schedule and sampler state there is.

Loading checks the saved model config against the model being resumed and raises
ValueError naming the first field that differs.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import torch
from diffusers.utils import SAFETENSORS_WEIGHTS_NAME
from safetensors.torch import load_file, save_file

from ..atomic import atomic_dir

CHECKPOINT_RE = re.compile(r"^step_(\d{8})$")

def save_model_dir(model, path: Path) -> Path:
    """`model.save_pretrained` (safetensors + config.json), atomically."""
    return atomic_dir(Path(path), lambda tmp: model.save_pretrained(tmp, safe_serialization=True))


# ----------------------------------------------------------------------------------------
# Optimizer state <-> flat tensors + JSON
# ----------------------------------------------------------------------------------------


def flatten_optimizer(state_dict: dict) -> tuple[dict[str, torch.Tensor], list[dict]]:
    """torch optimizer state_dict -> ({"state.<i>.<name>": tensor}, param_groups as JSON)."""
    tensors = {}
    for idx, entry in state_dict["state"].items():
        for name, value in entry.items():
            if not isinstance(value, torch.Tensor):
                raise ValueError(f"optimizer state {idx}.{name} is {type(value).__name__}; "
                                 f"only tensors can be checkpointed")
            tensors[f"state.{idx}.{name}"] = value.detach().cpu().contiguous()
    return tensors, json.loads(json.dumps(state_dict["param_groups"]))


def unflatten_optimizer(tensors: dict[str, torch.Tensor], param_groups: list[dict]) -> dict:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("state."):
            _, idx, name = key.split(".", 2)
            state.setdefault(int(idx), {})[name] = value
    return {"state": state, "param_groups": param_groups}


# ----------------------------------------------------------------------------------------
# Save / find / load
# ----------------------------------------------------------------------------------------


def checkpoint_dir(out_dir: Path, step: int) -> Path:
    return Path(out_dir) / "checkpoints" / f"step_{step:08d}"


def list_checkpoints(out_dir: Path) -> list[Path]:
    """Complete checkpoints under out_dir/checkpoints, oldest first."""
    root = Path(out_dir) / "checkpoints"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and CHECKPOINT_RE.match(p.name))


def latest_checkpoint(out_dir: Path) -> Path | None:
    found = list_checkpoints(out_dir)
    return found[-1] if found else None


def save_checkpoint(out_dir: Path, step: int, model, optimizer, ema=None,
                    extra: dict[str, Any] | None = None, keep: int = 0) -> Path:
    """Write checkpoint `step` atomically; keep only the newest `keep` (0 = all)."""
    tensors, groups = flatten_optimizer(optimizer.state_dict())
    tensors["rng.torch"] = torch.get_rng_state()
    meta = {"step": step, "param_groups": groups, **(extra or {})}

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp / "model", safe_serialization=True)
        if ema is not None:
            ema.save_pretrained(tmp / "ema", safe_serialization=True)
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        (tmp / "trainer_state.json").write_text(json.dumps(meta, indent=2))

    path = atomic_dir(checkpoint_dir(out_dir, step), write)
    if keep > 0:
        for old in list_checkpoints(out_dir)[:-keep]:
            shutil.rmtree(old)
    return path


def check_config(saved: dict, model, where: str, ignore: tuple[str, ...] = ()) -> None:
    """Raise ValueError naming the first config field where `saved` and `model` differ
    (fields in `ignore` may differ)."""
    current = json.loads(json.dumps(dict(model.config)))  # tuples -> lists, like the file
    for key in sorted(set(saved) | set(current)):
        if key.startswith("_") or key in ignore:
            continue  # diffusers bookkeeping: class name, library version
        if saved.get(key) != current.get(key):
            raise ValueError(f"checkpoint {where} has {key}={saved.get(key)!r} but the model "
                             f"has {key}={current.get(key)!r}; build the model with the "
                             f"checkpoint's config")


def load_weights(model, model_dir: Path, ignore: tuple[str, ...] = ()) -> None:
    """Load a save_pretrained directory into an existing model after checking its config
    (fields in `ignore` may differ, e.g. a context window that no weight depends on)."""
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise ValueError(f"{model_dir} is not a save_pretrained directory (no config.json)")
    saved = json.loads((model_dir / "config.json").read_text())
    check_config(saved, model, str(model_dir), ignore)
    weights = load_file(str(model_dir / SAFETENSORS_WEIGHTS_NAME), device=str(model.device))
    model.load_state_dict(weights, strict=True)


def load_checkpoint(path: Path, model, optimizer, ema=None) -> dict[str, Any]:
    """Restore model, EMA, optimizer and the torch RNG from `path`; return trainer_state."""
    path = Path(path)
    if not (path / "trainer_state.json").exists():
        raise ValueError(f"{path} is not a checkpoint (no trainer_state.json)")
    meta = json.loads((path / "trainer_state.json").read_text())
    load_weights(model, path / "model")
    if ema is not None:
        if not (path / "ema").is_dir():
            raise ValueError(f"checkpoint {path} has no EMA weights but EMA is on "
                             f"(ema_decay > 0)")
        load_weights(ema, path / "ema")
    tensors = load_file(str(path / "optimizer.safetensors"))
    optimizer.load_state_dict(unflatten_optimizer(tensors, meta["param_groups"]))
    torch.set_rng_state(tensors["rng.torch"])
    return meta
