"""Training checkpoints: atomic directories of safetensors + JSON, nothing pickled.

    <out>/checkpoints/step_00000500/
        model/            save_pretrained: config.json + diffusion_pytorch_model.safetensors
        ema/              the same for the EMA copy (absent when EMA is off)
        optimizer.safetensors   optimizer tensors, keys "state.<param index>.<name>",
                                plus "rng.torch" (the global torch RNG state)
        trainer_state.json      step, optimizer param_groups, the TrainConfig, world size

A checkpoint is written into a hidden temporary directory next to its final place and
renamed into place (`os.replace`), so a crash mid-save (even kill -9) leaves the previous
checkpoints as they were and never a half-written `step_*`; old checkpoints are renamed to
a hidden name before they are deleted, for the same reason. The learning-rate schedule is a
pure function of the step (see `loop.lr_at`), and data order and noise are seeded from
(seed, step, rank), so the step is all the schedule and sampler state there is.

Loading is all-or-nothing: every file is read and checked (the saved model config against
the model being resumed, then every tensor's name, shape and dtype, the optimizer state
against the optimizer's parameters, the RNG state) before anything is copied, so on any
error the model, EMA, optimizer and RNG are exactly as they were, and the error names the
file.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
from itertools import chain
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from ..atomic import atomic_dir
from ..loading import (check_tensors, read_json, read_model_config, read_safetensors,
                       read_weights)
from .sharding import load_full_state, shard_like

CHECKPOINT_RE = re.compile(r"^step_(\d{8})$")
STATE_KEY_RE = re.compile(r"^state\.(\d+)\.(.+)$")  # optimizer tensor: param index, name
# hidden leftovers of a save (atomic_dir's temporary) or a prune killed midway
LEFTOVERS = (".tmp-step_*", ".del-step_*")


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


def _saved_params(groups, optimizer, where: Path) -> dict[int, torch.Tensor]:
    """Saved parameter index -> the optimizer's parameter, after checking that the saved
    param_groups have the optimizer's layout (torch pairs them up by position)."""
    current = optimizer.param_groups
    if not (isinstance(groups, list) and len(groups) == len(current) and all(
            isinstance(g, dict) and isinstance(g.get("params"), list) for g in groups)):
        raise ValueError(f"{where}: param_groups must be a list of {len(current)} object(s) "
                         f"with a \"params\" list, as the optimizer has")
    for i, (saved, now) in enumerate(zip(groups, current)):
        if len(saved["params"]) != len(now["params"]):
            raise ValueError(f"{where}: param group {i} has {len(saved['params'])} "
                             f"parameters; the optimizer's has {len(now['params'])}")
    ids = [i for g in groups for i in g["params"]]
    if not all(type(i) is int for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"{where}: param_groups must list distinct int parameter indices")
    return dict(zip(ids, chain.from_iterable(g["params"] for g in current)))


def read_optimizer(path: Path, optimizer, groups, groups_file: Path
                   ) -> tuple[dict, torch.Tensor]:
    """optimizer.safetensors + the saved param_groups -> (a state_dict the optimizer takes,
    the torch RNG state), every tensor checked against the optimizer's parameters; the
    optimizer is not changed. Errors name the file."""
    tensors = read_safetensors(path)
    rng, now = tensors.pop("rng.torch", None), torch.get_rng_state()
    if rng is None or rng.dtype != now.dtype or rng.shape != now.shape:
        got = "nothing" if rng is None else f"{rng.dtype} {tuple(rng.shape)}"
        raise ValueError(f"{path}: \"rng.torch\" must be the torch RNG state ({now.dtype} "
                         f"{tuple(now.shape)}), got {got}")
    params = _saved_params(groups, optimizer, groups_file)
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in sorted(tensors.items()):
        match = STATE_KEY_RE.match(key)
        if match is None or int(match[1]) not in params:
            raise ValueError(f"{path}: unexpected tensor {key!r}; expected \"rng.torch\" and "
                             f"\"state.<i>.<name>\" for a parameter i of {groups_file.name}")
        p = params[int(match[1])]
        if value.ndim and (value.shape != p.shape or value.dtype != p.dtype):
            raise ValueError(f"{path}: {key!r} is {value.dtype} {tuple(value.shape)}; its "
                             f"parameter is {p.dtype} {tuple(p.shape)}")
        value = shard_like(value, p) if value.ndim else value  # as FSDP shards p, if it does
        state.setdefault(int(match[1]), {})[match[2]] = value
    names = sorted({tuple(sorted(entry)) for entry in state.values()})
    if len(names) > 1:  # one optimizer keeps the same tensors for every parameter it steps
        raise ValueError(f"{path}: parameters have different optimizer state {names}; "
                         f"some tensors are missing")
    return {"state": state, "param_groups": groups}, rng


# ----------------------------------------------------------------------------------------
# Save / find
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
    """Write checkpoint `step` atomically; keep only the newest `keep` (0 = all).
    `optimizer` is the optimizer or its state dict (under FSDP: gathered, see sharding)."""
    state = optimizer if isinstance(optimizer, dict) else optimizer.state_dict()
    tensors, groups = flatten_optimizer(state)
    tensors["rng.torch"] = torch.get_rng_state()
    meta = {"step": step, "param_groups": groups, **(extra or {})}

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp / "model", safe_serialization=True)
        if ema is not None:
            ema.save_pretrained(tmp / "ema", safe_serialization=True)
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        (tmp / "trainer_state.json").write_text(json.dumps(meta, indent=2))

    root = Path(out_dir) / "checkpoints"
    for pattern in LEFTOVERS:  # only one process saves: no other save is under way
        for stale in root.glob(pattern):
            shutil.rmtree(stale)
    path = atomic_dir(checkpoint_dir(out_dir, step), write)
    if keep > 0:
        for old in list_checkpoints(out_dir)[:-keep]:
            trash = old.with_name(f".del-{old.name}")
            os.replace(old, trash)  # hidden first: a kill mid-delete leaves no half step_*
            shutil.rmtree(trash)
    return path


# ----------------------------------------------------------------------------------------
# Load: read and check everything, then copy
# ----------------------------------------------------------------------------------------


def check_config(saved: dict, model, where: str, ignore: tuple[str, ...] = ()) -> None:
    """Raise ValueError naming the first config field where `saved` and `model` differ
    (fields in `ignore` may differ; a field `saved` lacks, from before it existed, must have
    its default)."""
    # diffusers bookkeeping (class name, library version, the path it was loaded from: a
    # Path, which JSON cannot hold) is not part of the architecture
    current = {k: v for k, v in model.config.items() if not k.startswith("_")}
    current = json.loads(json.dumps(current))  # tuples -> lists, like the file
    # a field the file lacks predates it: loading gives it its default, so it must be that
    defaults = {k: p.default for k, p in inspect.signature(type(model).__init__).parameters
                .items() if p.default is not inspect.Parameter.empty}
    for key in sorted(set(saved) | set(current)):
        if key.startswith("_") or key in ignore:
            continue
        if key not in saved and key in defaults and current.get(key) == defaults[key]:
            continue
        if saved.get(key) != current.get(key):
            raise ValueError(f"checkpoint {where} has {key}={saved.get(key)!r} but the model "
                             f"has {key}={current.get(key)!r}; build the model with the "
                             f"checkpoint's config")


def read_model_dir(model, model_dir: Path, ignore: tuple[str, ...] = ()
                   ) -> dict[str, torch.Tensor]:
    """The tensors of a save_pretrained directory, checked against `model` (its config,
    then every tensor's name, shape and dtype) without changing it."""
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise ValueError(f"{model_dir} is not a save_pretrained directory (no config.json)")
    check_config(read_model_config(model_dir), model, str(model_dir / "config.json"), ignore)
    tensors, where = read_weights(model_dir)
    check_tensors(model.state_dict(), tensors, where)
    return tensors


def load_weights(model, model_dir: Path, ignore: tuple[str, ...] = ()) -> None:
    """Load a save_pretrained directory into an existing model after checking its config
    (fields in `ignore` may differ, e.g. a context window that no weight depends on) and
    every tensor; on any error the model is unchanged."""
    model.load_state_dict(read_model_dir(model, model_dir, ignore), strict=True)


# what turns latents into tokens and tokens back into latents: the only world-model weights
# that depend on the autoencoder's latent shape (channels, size) and the patch size
TOKENISER = ("patch_in.weight", "patch_in.bias", "patch_out.weight", "patch_out.bias")
LATENT_GEOMETRY = ("latent_channels", "latent_size", "patch_size")


def load_transformer(model, model_dir: Path) -> None:
    """Start a world model from the transformer of a world trained on another autoencoder's
    latents: every tensor but `TOKENISER`, which keeps its initialisation (the output's is
    zero, so the model starts at velocity 0 and learns to read the new latents).

    The two must agree on every config field but `LATENT_GEOMETRY` (and the context window,
    which no weight uses) and on the token grid (latent_size / patch_size), so every block
    sees the same positions it was trained on; otherwise nothing is loaded and the error
    names the field. The same latents are not an error: load_weights would take all."""
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise ValueError(f"{model_dir} is not a save_pretrained directory (no config.json)")
    saved = read_model_config(model_dir)
    where = str(model_dir / "config.json")
    check_config(saved, model, where, ignore=LATENT_GEOMETRY + ("window_chunks",))
    mine = model.config
    try:
        theirs = saved["latent_size"] // saved["patch_size"]
    except (KeyError, TypeError, ZeroDivisionError):
        raise ValueError(f"{where} has no valid latent_size and patch_size") from None
    grid = mine.latent_size // mine.patch_size
    if theirs != grid:
        raise ValueError(
            f"{where} has a {theirs}x{theirs} token grid (latent_size {saved['latent_size']} "
            f"/ patch_size {saved['patch_size']}); this model's is {grid}x{grid} "
            f"(latent_size {mine.latent_size} / patch_size {mine.patch_size}): choose the "
            f"patch size that gives the same grid")
    tensors, weights = read_weights(model_dir)
    own = model.state_dict()
    body = {k: v for k, v in tensors.items() if k not in TOKENISER}
    check_tensors({k: v for k, v in own.items() if k not in TOKENISER}, body, weights)
    model.load_state_dict({**own, **body}, strict=True)


def read_trainer_state(path: Path) -> dict[str, Any]:
    meta = read_json(path, "trainer state")
    if not (isinstance(meta, dict) and type(meta.get("step")) is int and meta["step"] >= 0
            and isinstance(meta.get("param_groups"), list)):
        raise ValueError(f"trainer state {path} must be an object with an int \"step\" >= 0 "
                         f"and a \"param_groups\" list")
    return meta


def load_checkpoint(path: Path, model, optimizer, ema=None) -> dict[str, Any]:
    """Restore model, EMA, optimizer and the torch RNG from `path`; return trainer_state.
    All or nothing: on any error none of them has changed. Under FSDP every rank calls it
    and keeps its own shards."""
    path = Path(path)
    state_file = path / "trainer_state.json"
    if not state_file.exists():
        raise ValueError(f"{path} is not a checkpoint (no trainer_state.json)")
    meta = read_trainer_state(state_file)
    weights = read_model_dir(model, path / "model")
    if ema is not None and not (path / "ema").is_dir():
        raise ValueError(f"checkpoint {path} has no EMA weights but EMA is on "
                         f"(ema_decay > 0)")
    ema_weights = read_model_dir(ema, path / "ema") if ema is not None else None
    opt_state, rng = read_optimizer(path / "optimizer.safetensors", optimizer,
                                    meta["param_groups"], state_file)
    # everything is read and checked: nothing below can fail half-way
    load_full_state(model, weights)
    if ema is not None:
        load_full_state(ema, ema_weights)
    optimizer.load_state_dict(opt_state)
    torch.set_rng_state(rng)
    return meta
