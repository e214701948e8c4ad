"""Dataclass configs per component, and the presets registry.

One `WorldConfig` holds a dataclass per stage of the pipeline (data -> autoencoder -> model ->
training -> sampling). Presets name sizes the way DiT names `DiT-S/8`:

    tiny   CI and tests: seconds on a 2-core CPU
    small  a CPU laptop: the shipped default checkpoint
    base   one GPU
    large  many GPUs (FSDP, bf16)

`make_config(preset, **overrides)` builds one; overrides are `section__field=value` or
`section={...}` and an unknown key fails loudly, naming it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

PRESETS = ("tiny", "small", "base", "large")


# ----------------------------------------------------------------------------------------
# Per-component configs
# ----------------------------------------------------------------------------------------


@dataclass
class DataConfig:
    """What `data record` records by default, and what a trained world was trained on (the
    world recipe rewrites these from the store it actually read)."""
    engine: str = "doom"  # "doom" | "procedural"
    map: str = "MAP01"  # doom map name; ignored by the procedural engine
    size: int = 64  # frames are size x size pixels
    episodes: int = 200
    frames: int = 64  # frames per episode
    policy: str = "mix"  # scripted player (engines.policies) or "mix"
    event_rate: float = 0.05  # probability per step of an event prompt
    clip_chunks: int = 4  # chunks per training clip (chunk length: model.chunk_frames)
    workers: int = 2  # recording processes, one engine each


@dataclass
class AutoencoderConfig:
    # diffusers AutoencoderKL: len(block_out_channels) - 1 down-samplings of 2x each
    block_out_channels: tuple[int, ...] = (32, 64, 128, 128)
    layers_per_block: int = 1
    latent_channels: int = 8
    norm_num_groups: int = 16
    depth_channel: bool = False  # encode depth as a fourth input channel
    kl_weight: float = 1e-6
    mse_weight: float = 0.1  # small MSE next to L1: L1 alone leaves PSNR on the table
    lr: float = 5e-4
    steps: int = 20_000
    batch_size: int = 32  # frames per step


@dataclass
class ModelConfig:
    width: int = 256  # d
    depth: int = 6  # transformer blocks
    heads: int = 4
    patch_size: int = 1  # latent patch side
    chunk_frames: int = 4  # latent frames per chunk
    window_chunks: int = 8  # KV-cache window (chunks of context kept)
    control: str = "both"  # "pose" | "action" | "both"
    action_width: int = 7  # see camera.ACTION_FIELDS
    text_dim: int = 384  # sentence-encoder width (all-MiniLM-L6-v2)
    text_tokens: int = 3  # scene / character / event
    memory_tokens: int = 0  # extra context tokens reserved for memory (0 = off)
    cache_latent: bool = False  # concatenate a rendered 3D-cache latent + mask to the input
    mlp_ratio: float = 4.0


@dataclass
class TrainConfig:
    steps: int = 6000
    batch_size: int = 8
    lr: float = 3e-4
    weight_decay: float = 0.01
    warmup_steps: int = 200
    grad_clip: float = 1.0
    ema_decay: float = 0.999
    forcing: str = "diffusion"  # "teacher" | "diffusion"
    time_schedule: str = "logit_normal"  # flow time t ~ "logit_normal" (SD3) | "uniform"
    text_dropout: float = 0.1
    seed: int = 0
    checkpoint_every: int = 500
    keep_checkpoints: int = 3  # older step_* checkpoint directories are deleted
    mixed_precision: str = "no"  # "no" | "bf16"


@dataclass
class SampleConfig:
    steps: int = 8
    solver: str = "euler"  # "euler" | "heun"
    guidance: float = 1.0  # classifier-free guidance scale on text (1 = off)


@dataclass
class WorldConfig:
    preset: str = "small"
    data: DataConfig = field(default_factory=DataConfig)
    autoencoder: AutoencoderConfig = field(default_factory=AutoencoderConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    sample: SampleConfig = field(default_factory=SampleConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "WorldConfig":
        """The inverse of `to_dict`; fields in RETIRED (read by nothing, kept in older
        world_config.json files) are dropped, any other unknown field is an error."""
        d = {k: dict(v) if isinstance(v, dict) else v for k, v in d.items()}
        for section, name in RETIRED:
            d.get(section, {}).pop(name, None)
        preset = d.pop("preset", "small")
        return make_config(preset, **d)


# fields that once existed and had no effect; older configs on disk may still carry them
RETIRED = (("data", "chunk_frames"), ("train", "log_every"))


# ----------------------------------------------------------------------------------------
# Presets: only what differs from the dataclass defaults (the `small` preset)
# ----------------------------------------------------------------------------------------

_PRESET_OVERRIDES: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "data": {"size": 32, "episodes": 4, "frames": 16, "clip_chunks": 2, "workers": 1},
        "autoencoder": {"block_out_channels": (8, 16, 16, 16), "latent_channels": 4,
                        "norm_num_groups": 4, "steps": 4, "batch_size": 4},
        "model": {"width": 32, "depth": 2, "heads": 2, "window_chunks": 4},
        "train": {"steps": 4, "batch_size": 2, "warmup_steps": 1,
                  "checkpoint_every": 2},
        "sample": {"steps": 2},
    },
    "small": {},
    "base": {
        "data": {"size": 128, "episodes": 2000, "frames": 128, "clip_chunks": 8, "workers": 8},
        "autoencoder": {"block_out_channels": (64, 128, 256, 256), "latent_channels": 16,
                        "layers_per_block": 2, "norm_num_groups": 32},
        "model": {"width": 768, "depth": 12, "heads": 12, "patch_size": 2, "window_chunks": 16},
        "train": {"steps": 100_000, "batch_size": 32, "mixed_precision": "bf16"},
    },
    "large": {
        "data": {"size": 256, "episodes": 20_000, "frames": 256, "clip_chunks": 8,
                 "workers": 32},
        "autoencoder": {"block_out_channels": (128, 256, 512, 512), "latent_channels": 16,
                        "layers_per_block": 2, "norm_num_groups": 32},
        "model": {"width": 1536, "depth": 24, "heads": 24, "patch_size": 2,
                  "window_chunks": 16},
        "train": {"steps": 400_000, "batch_size": 256, "mixed_precision": "bf16"},
    },
}


def _sections() -> dict[str, type]:
    return {f.name: f.default_factory for f in dataclasses.fields(WorldConfig)
            if f.name != "preset"}


def _apply(section_obj: Any, section: str, values: dict[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(section_obj)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(
            f"unknown config key {section}.{unknown[0]!r}; {section} has: {sorted(names)}")
    return dataclasses.replace(section_obj, **values)


def make_config(preset: str = "small", **overrides: Any) -> WorldConfig:
    """Build the config of a preset, then apply overrides.

    >>> make_config("tiny", model__width=64).model.width
    64
    >>> make_config("tiny", train={"steps": 10}).train.steps
    10
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {PRESETS}")
    sections = _sections()
    grouped: dict[str, dict[str, Any]] = {s: {} for s in sections}
    for s, values in _PRESET_OVERRIDES[preset].items():
        grouped[s].update(values)
    for key, value in overrides.items():
        section, _, name = key.partition("__")
        if section not in sections:
            raise ValueError(
                f"unknown config key {key!r}; expected one of {sorted(sections)} "
                f"(as section={{...}} or section__field=value)")
        if name:
            grouped[section][name] = value
        elif isinstance(value, dict):
            grouped[section].update(value)
        else:
            raise ValueError(f"config key {key!r} needs a dict of fields, got {value!r}")
    built = {s: _apply(factory(), s, grouped[s]) for s, factory in sections.items()}
    built["autoencoder"] = dataclasses.replace(
        built["autoencoder"], block_out_channels=tuple(built["autoencoder"].block_out_channels))
    return WorldConfig(preset=preset, **built)
