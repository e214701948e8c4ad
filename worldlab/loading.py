"""Loading files whole and checked, so that a load is all or nothing: JSON and
safetensors files are read completely, every tensor is checked against the model that will
take it (names, shapes, dtypes), and only then is anything used. Every error names the file.

A leaf (standard library, torch, safetensors, diffusers' file names): packaged worlds,
training checkpoints and the model's own loader all read through it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from diffusers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFETENSORS_WEIGHTS_NAME
from safetensors import SafetensorError
from safetensors.torch import load_file


def read_json(path: Path, what: str = "JSON file"):
    """The JSON value in `path`; a missing or unreadable file, bytes that are not UTF-8 or
    text that is not JSON raise ValueError naming `what` and the file."""
    try:
        return json.loads(Path(path).read_bytes().decode("utf-8"))
    except OSError as e:
        raise ValueError(f"cannot read {what} {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{what} {path} is not UTF-8 text ({e.reason} at byte {e.start})") \
            from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} {path} is not valid JSON: {e}") from None
    except RecursionError:
        raise ValueError(f"{what} {path} nests too deeply to be read") from None


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors file, on the CPU; a missing, unreadable, truncated or
    corrupt file raises ValueError naming it."""
    try:
        return load_file(str(path))
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    except SafetensorError as e:
        raise ValueError(f"{path} is not a readable safetensors file (truncated or corrupt): "
                         f"{e}") from None


def read_weights(model_dir: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """The tensors of a save_pretrained directory, one file or shards listed by an index
    (package_world shards big models), and the file that names them all (for errors)."""
    single, index = model_dir / SAFETENSORS_WEIGHTS_NAME, model_dir / SAFE_WEIGHTS_INDEX_NAME
    if single.is_file() or not index.is_file():
        return read_safetensors(single), single
    weight_map = read_json(index, "weight index")
    weight_map = weight_map.get("weight_map") if isinstance(weight_map, dict) else None
    if not (isinstance(weight_map, dict) and all(
            isinstance(v, str) and v == Path(v).name for v in weight_map.values())):
        raise ValueError(f"weight index {index} must map tensor names to file names in "
                         f"{model_dir} under \"weight_map\"")
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        part = read_safetensors(model_dir / shard)
        stray = sorted(k for k in part if weight_map.get(k) != shard)
        if stray:
            raise ValueError(f"{model_dir / shard} holds {stray[0]!r}, which {index} does not "
                             f"place there")
        tensors.update(part)
    return tensors, index


def check_tensors(expected: dict[str, torch.Tensor], found: dict[str, torch.Tensor],
                  where: Path) -> None:
    """Raise ValueError naming `where` and the first tensor of `found` that the state_dict
    `expected` cannot take: missing, unexpected, another shape or a dtype of another kind
    (a float tensor may fill a float of another precision: packaged worlds are float16)."""
    missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    if missing:
        raise ValueError(f"{where} lacks {len(missing)} tensor(s) the model needs, first "
                         f"{missing[0]!r}")
    if extra:
        raise ValueError(f"{where} has {len(extra)} tensor(s) the model does not have, first "
                         f"{extra[0]!r}")
    for key in sorted(expected):
        want, got = expected[key], found[key]
        if got.shape != want.shape:
            raise ValueError(f"{where}: tensor {key!r} has shape {tuple(got.shape)}; the "
                             f"model expects {tuple(want.shape)}")
        if got.dtype != want.dtype and not (got.is_floating_point()
                                            and want.is_floating_point()):
            raise ValueError(f"{where}: tensor {key!r} is {got.dtype}; the model expects "
                             f"{want.dtype}")


def read_model_config(model_dir: Path) -> dict:
    """The config.json object of a save_pretrained directory; errors name the file."""
    config_file = Path(model_dir) / "config.json"
    config = read_json(config_file, "model config")
    if not isinstance(config, dict):
        raise ValueError(f"model config {config_file} must be a JSON object, got "
                         f"{type(config).__name__}")
    return config


def load_module(cls, model_dir: Path):
    """A save_pretrained directory -> a `cls` model in eval mode, in the file's dtype. Its
    config.json builds a skeleton on the meta device (no memory, no draw from the torch
    RNG) and every tensor is checked against it before any is used."""
    model_dir = Path(model_dir)
    config = read_model_config(model_dir)
    try:
        with torch.device("meta"):
            model = cls.from_config(config)
    except (TypeError, ValueError, RuntimeError, ArithmeticError) as e:
        raise ValueError(f"model config {model_dir / 'config.json'} does not describe a "
                         f"{cls.__name__}: {e}") from None
    tensors, where = read_weights(model_dir)
    check_tensors(model.state_dict(), tensors, where)
    model.load_state_dict(tensors, strict=True, assign=True)  # the checked tensors, no copy
    return model.eval()
