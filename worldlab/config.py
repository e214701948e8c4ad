"""Dataclass configs per component, and the presets registry.

One `WorldConfig` holds a dataclass per stage of the pipeline (data -> autoencoder -> model ->
training -> sampling). Presets name sizes the way DiT names `DiT-S/8`:

    tiny   CI and tests: seconds on a 2-core CPU
    small  a CPU laptop: the shipped default checkpoint
    base   one GPU
    large  many GPUs (FSDP, bf16)

`make_config(preset, **overrides)` builds one; overrides are `section__field=value` or
`section={...}` and an unknown key fails loudly, naming it. `validate_config` checks every
config it builds (and so every `world_config.json` read through `WorldConfig.from_dict`)
field by field: types and allowed values, as the code that reads each field needs them. A
bad value fails where it is read, naming the field, not at the first training or sampling
step.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
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
    # doom map, or several joined by "+" as store.describe writes them ("MAP01+MAP02"):
    # episode seed s plays episodes.recording.map_of(s, maps); ignored by procedural
    map: str = "MAP01"
    start: str = "player"  # STARTS: the engine's own start, or start_options(seed)
    monsters: str = "on"  # MONSTERS (doom; "invulnerable": monsters, but no deaths)
    # WALLS (procedural): "room", one material for all of a room's walls; "segment", one per
    # straight wall segment and a few posters per room, so no wall tells another's look
    walls: str = "room"
    size: int = 64  # frames are size x size pixels
    episodes: int = 200
    frames: int = 64  # frames per episode
    policy: str = "mix"  # scripted player (engines.policies) or "mix"
    event_rate: float = 0.05  # probability per step of an event prompt
    clip_chunks: int = 4  # chunks per training clip (chunk length: model.chunk_frames)
    workers: int = 2  # recording processes, one engine each


@dataclass
class AutoencoderConfig:
    # diffusers AutoencoderKL: len(block_out_channels) - 1 down-samplings of 2x each, so
    # 4 blocks compress 8x, 3 blocks 4x (tokens per frame: model.autoencoder.tokens_per_frame)
    block_out_channels: tuple[int, ...] = (32, 64, 128, 128)
    layers_per_block: int = 1
    latent_channels: int = 8
    norm_num_groups: int = 16
    depth_channel: bool = False  # encode depth as a fourth input channel
    kl_weight: float = 1e-6
    mse_weight: float = 0.1  # small MSE next to L1: L1 alone leaves PSNR on the table
    # L1 between the frames' and the reconstructions' amplitude spectra (losses.py), against
    # blur without a critic; 0 = off
    spectral_weight: float = 0.0
    # its frequencies weighted by |k|^exponent (mean 1): 0 = alike, 2 = as the Laplacian
    spectral_exponent: float = 0.0
    lr: float = 5e-4
    steps: int = 20_000
    batch_size: int = 32  # frames per step
    # the new weights (autoencoder and critic) and the order of the frames; `train.seed` is
    # the world model's
    seed: int = 0
    # adversarial patch critic (model/discriminator.py), against blur; 0 = off (L1+MSE+KL)
    disc_weight: float = 0.0  # times the adaptive weight; latent-diffusion uses 0.5
    disc_start: int = 5000  # reconstruction-only steps before the adversarial term
    disc_channels: int = 32  # critic width: 0.69 M parameters at 3 layers
    disc_layers: int = 3  # stride-2 convolutions: 70x70-pixel patches at 3, 34 at 2, 16 at 1
    # False: only the decoder learns, from saved weights (`train autoencoder --init`): the
    # latents, and the world models that read them, stay valid while the frames get sharper
    train_encoder: bool = True


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
    # memory (worldlab.memory; set from the memory section by `memory_model_fields`): the
    # most memory tokens the last chunk reads through its gated memory attention (0 = no
    # memory attention), and how they summarise a chunk: 1 = every latent patch a token;
    # r > 1 = a coarse and a fine token per s x s patches, r = chunk_frames s^2 / 2 times
    # fewer tokens (WorldPlay2, FramePack)
    memory_tokens: int = 0
    memory_compress: int = 1
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
    mixed_precision: str = "no"  # "no" | "bf16" (autocast; on a GPU only, see train.loop)
    compile: bool = False  # torch.compile the model (inductor); worth it on a GPU
    # recompute each block's activations in the backward pass: ~1/depth of the activation
    # memory for ~1/3 more compute (train.hardware estimates both ways)
    grad_checkpointing: bool = False
    # Long horizon (train.anti_drift; each needs forcing="teacher": the context chunks are
    # what they change, and only the last chunk carries loss). Off by default.
    # the context the model sees is corrupted on a share of the samples: "noise" | "blur" |
    # "colour" (simple corruptions) | "bank" (its own recorded errors, AlayaWorld / SVI)
    context_corruption: str = "none"
    corruption_prob: float = 0.5  # share of samples whose context is corrupted
    context_noise: float = 0.0  # diffusion forcing on the context: t ~ U(0, this) on it
    self_rollout_prob: float = 0.0  # share of steps whose context is the model's own rollout
    self_rollout_steps: int = 4  # Euler steps of that rollout
    # chunks of own rollout before a clip (long rollouts): clips are read that much longer,
    # rolled out from their first chunk, then cropped to data.clip_chunks, so the context
    # is the model's own chunks that many chunks deep and a step costs no more to train
    self_rollout_chunks: int = 0
    # share of samples whose memory chunks are the model's own: each slot chunk generated
    # from the engine's chunk before it (self_rollout_steps Euler steps), as play's memory
    # holds generated chunks rather than the engine's
    memory_own_prob: float = 0.0
    # the memory parameters (memory attention and encoder, new in a memory fine-tune and
    # starting at zero effect) learn at this many times the rate of the rest
    memory_lr_scale: float = 1.0
    # a run with an out dir logs its scalars (loss, lr, grad_norm, ...) through accelerate's
    # TensorBoard tracker to <out>/tensorboard: `tensorboard --logdir runs/` shows every run
    tensorboard: bool = True


@dataclass
class SampleConfig:
    steps: int = 8
    solver: str = "euler"  # "euler" | "heun"
    guidance: float = 1.0  # classifier-free guidance scale on text (1 = off)
    # inference switches, applied when a world is loaded (each has a measured quality cost
    # in data/results/distill.json): "full" | "fast" (the world's small distilled decoder)
    decoder: str = "full"
    quantize: str = "none"  # "none" | "int8" (dynamic int8 linear layers, CPU)
    compile: bool = False  # torch.compile the transformer and the decoder
    autocast: str = "no"  # "no" | "bf16" (GPU)
    # flow time a generated chunk is noised to before it becomes context (0: clean); worlds
    # trained with train.context_noise are sampled with a small one
    context_noise: float = 0.0
    # "cache": the pixels the 3D cache covers (memory.cache3d) are its render into the
    # chunk's cameras (`memory.stream.Stream.show`), the world draws the rest; "off": the
    # world draws every pixel
    composite: str = "off"
    # the painted render's soft z-buffer (`PointCache.render_splats`): a pixel shows the
    # mean of the cache's points within (1 + paint_blend) times its nearest depth (0: the
    # nearest alone). Own depth is about 20% off, so a surface seen from several frames is a
    # cloud of points and the nearest is the most wrong. On the recall validation walks
    # (2026-12-05, memory_recall's seed-0 cache3d_own+composite) 0 scored 20.99 dB, 0.05
    # 21.25, 0.3 21.85, 1 22.37, 3 22.60 and no depth test 22.70; 1 keeps the surfaces more
    # than twice as far hidden (the engine's depth: 22.95 at 0, 24.01 at 1). Higher blends
    # trade texture for PSNR (loop walks: sharpness 0.90x the engine's at 0.3, 0.65x at 1)
    paint_blend: float = 1.0
    # where the world's own pixel is nearer than paint_yield times the painted render's
    # depth (the depth head on the world's frame), the world's pixel stays: what the world
    # draws in front of a remembered surface (a character an event prompt brought) is not
    # painted over. 0: the cache's render wins wherever it covers
    paint_yield: float = 0.0
    # the last true frame (the engine's, before the world draws), moved into the next
    # chunk's cameras with its depth (`cache3d.view_warp`: no splatting gaps, hidden
    # surfaces left empty), is painted first, the cache's render where it leaves holes, the
    # world the rest: "off", "nearest" or "bilinear" (its colour sampling). Frames the world
    # drew are not moved again (`memory.stream.Stream.observe`)
    paint_view: str = "off"


@dataclass
class DistillConfig:
    """A few-step student distilled from a many-step teacher (`train distill`); "none" for
    a world trained by flow matching alone. The student is the same WorldModel sampled with
    `student_steps` Euler steps (sample.steps of the student's world)."""
    recipe: str = "none"  # "none" | "ode" | "consistency" | "dmd" | "dmd_clip"
    student_steps: int = 4  # sampling steps the student is trained for
    teacher_steps: int = 16  # the teacher's Euler steps (ODE pairs, consistency grid)
    steps: int = 400  # student optimiser steps
    batch_size: int = 16
    lr: float = 5e-5  # student
    critic_lr: float = 1e-4  # DMD's fake-score critic
    critic_ratio: int = 4  # critic steps per student step (DMD)
    grad_chunks: int = 1  # generated chunks, counted from the last, that carry gradient
    pairs: int = 2048  # ODE pairs sampled from the teacher (recipe "ode")
    ema_decay: float = 0.99
    seed: int = 0


@dataclass
class MemoryConfig:
    """What carries the past beyond the KV window into each generated chunk (worldlab.memory);
    all off is a world without memory. The model's architecture follows from it
    (`memory_model_fields`: memory tokens, their compression, the 3D-cache input)."""
    sink: bool = False  # the first chunk stays in memory for the whole rollout (AlayaWorld)
    # past chunks older than the KV window, retrieved by field-of-view overlap with the
    # chunk to generate (WorldPlay's reconstituted context; memory.retrieval)
    retrieve: int = 0
    # the 3D cache (GEN3C, AlayaWorld): past frames fused into points with depth from
    # "oracle" (the engine: an upper bound) or "own" (the depth head on the model's own
    # frames), rendered into the new chunk's cameras and given with its coverage mask (a
    # model without that input, model.cache_latent False, keeps the cache only to paint:
    # sample.composite = "cache")
    cache3d: str = "off"  # "off" | "oracle" | "own"
    cache_stride: int = 2  # every k-th past frame is fused into the point cache
    # the point cache's bound: past it the points seen least recently go, so every chunk
    # costs the same however long the walk (about 16 frames of own-depth points at 64 px)
    cache_points: int = 65536


@dataclass
class WorldConfig:
    preset: str = "small"
    data: DataConfig = field(default_factory=DataConfig)
    autoencoder: AutoencoderConfig = field(default_factory=AutoencoderConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    sample: SampleConfig = field(default_factory=SampleConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "WorldConfig":
        """The inverse of `to_dict`; fields in RETIRED (read by nothing, kept in older
        world_config.json files) are dropped, any other unknown field is an error."""
        if not isinstance(d, dict):
            raise ValueError(f"a world config must be an object with the sections "
                             f"{sorted(_sections())}, got {type(d).__name__}")
        d = {k: dict(v) if isinstance(v, dict) else v for k, v in d.items()}
        for section, name in RETIRED:
            if isinstance(d.get(section), dict):
                d[section].pop(name, None)
        preset = d.pop("preset", "small")
        return make_config(preset, **d)


# fields that once existed and had no effect; older configs on disk may still carry them
RETIRED = (("data", "chunk_frames"), ("train", "log_every"))


# ----------------------------------------------------------------------------------------
# Validation: what each field must hold, as the code that reads it needs
# ----------------------------------------------------------------------------------------

# allowed values, spelled here once: the rooms that check a field (model/sampler.py and
# model/diamond.py: SOLVERS; model/dit.py: CONTROLS; train/losses.py: FORCINGS,
# TIME_SCHEDULES; train/cli.py: DECODERS; engines/doom.py: MONSTERS;
# engines/procedural_world.py: WALLS; episodes/recording.py: STARTS) import them from this leaf
CONTROLS = ("pose", "action", "both")
FORCINGS = ("teacher", "diffusion")
TIME_SCHEDULES = ("logit_normal", "uniform")
MIXED_PRECISION = ("no", "bf16")
SOLVERS = ("euler", "heun")
DECODERS = ("full", "fast")
QUANTIZE = ("none", "int8")
AUTOCAST = ("no", "bf16")
# as train/distill.py reads them
RECIPES = ("none", "ode", "consistency", "dmd", "dmd_clip")
# as train/anti_drift.py reads them
CORRUPTIONS = ("none", "noise", "blur", "colour", "bank")
# as memory/ reads them
CACHE3D = ("off", "oracle", "own")
COMPOSITES = ("off", "cache")
PAINT_VIEWS = ("off", "nearest", "bilinear")
# recording's starts, DOOM's monster modes and the procedural engine's wall materials
STARTS = ("player", "random")
MONSTERS = ("off", "on", "invulnerable")
WALLS = ("room", "segment")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)  # JSON true is not a count


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# a rule: (what the value must be, a test of that) and a range on top of it (text, test;
# None when there is none); the kind is tested first, so a range test may assume it
def _int(lo: int) -> tuple:
    return "an int", _is_int, f">= {lo}", lambda v: v >= lo


def _number(bound: str | None = None, in_bound=None) -> tuple:
    return "a finite number", _is_number, bound, in_bound


def _one_of(choices: tuple[str, ...]) -> tuple:
    return f"one of {choices}", lambda v: isinstance(v, str) and v in choices, None, None


_COUNT, _INDEX = _int(1), _int(0)
_POSITIVE = _number("> 0", lambda v: v > 0)
_NONNEGATIVE = _number(">= 0", lambda v: v >= 0)
_FRACTION = _number("in [0, 1]", lambda v: 0 <= v <= 1)
_FLAG = ("true or false", lambda v: isinstance(v, bool), None, None)
_CONTEXT_NOISE = _number("in [0, 0.5] (a small flow time)", lambda v: 0 <= v <= 0.5)
_MAPS = ("a str", lambda v: isinstance(v, str), "map names joined by '+'",
         lambda v: all(m.strip() for m in v.split("+")))
_NAME = ("a str", lambda v: isinstance(v, str), "non-blank", lambda v: bool(v.strip()))
_CHANNELS = ("a non-empty list of ints",
             lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(map(_is_int, v)),
             "a list of ints >= 1", lambda v: min(v) >= 1)

RULES: dict[str, dict[str, tuple]] = {
    # data.engine and policy are names, not choices: a store may hold several engines
    # ("doom+procedural") or imported footage ("realestate10k")
    "data": {"engine": _NAME, "size": _COUNT, "episodes": _COUNT,
             "map": _MAPS, "start": _one_of(STARTS), "monsters": _one_of(MONSTERS),
             "walls": _one_of(WALLS), "frames": _COUNT, "policy": _NAME, "event_rate": _FRACTION,
             "clip_chunks": _COUNT, "workers": _COUNT},
    "autoencoder": {"block_out_channels": _CHANNELS, "layers_per_block": _COUNT,
                    "latent_channels": _COUNT, "norm_num_groups": _COUNT,
                    "depth_channel": _FLAG, "kl_weight": _NONNEGATIVE,
                    "mse_weight": _NONNEGATIVE, "spectral_weight": _NONNEGATIVE,
                    "spectral_exponent": _NONNEGATIVE, "lr": _POSITIVE, "steps": _COUNT,
                    "seed": _INDEX, "batch_size": _COUNT, "disc_weight": _NONNEGATIVE,
                    "disc_start": _INDEX, "disc_channels": _COUNT, "disc_layers": _COUNT,
                    "train_encoder": _FLAG},
    "model": {"width": _COUNT, "depth": _COUNT, "heads": _COUNT, "patch_size": _COUNT,
              "chunk_frames": _COUNT, "window_chunks": _COUNT, "control": _one_of(CONTROLS),
              "action_width": _int(4),  # forward, right, yaw, pitch, then the buttons
              "text_dim": _COUNT, "text_tokens": _COUNT, "memory_tokens": _INDEX,
              "memory_compress": _COUNT, "cache_latent": _FLAG, "mlp_ratio": _POSITIVE},
    "train": {"steps": _COUNT, "batch_size": _COUNT, "lr": _POSITIVE,
              "weight_decay": _NONNEGATIVE, "warmup_steps": _INDEX, "grad_clip": _POSITIVE,
              "ema_decay": _number(">= 0 and < 1", lambda v: 0 <= v < 1),
              "forcing": _one_of(FORCINGS), "time_schedule": _one_of(TIME_SCHEDULES),
              "text_dropout": _FRACTION, "seed": _INDEX,  # numpy SeedSequence: >= 0
              "checkpoint_every": _COUNT, "keep_checkpoints": _INDEX,
              "mixed_precision": _one_of(MIXED_PRECISION), "compile": _FLAG,
              "grad_checkpointing": _FLAG, "context_corruption": _one_of(CORRUPTIONS),
              "corruption_prob": _FRACTION, "context_noise": _CONTEXT_NOISE,
              "self_rollout_prob": _FRACTION, "self_rollout_steps": _COUNT,
              "self_rollout_chunks": _INDEX, "memory_own_prob": _FRACTION,
              "memory_lr_scale": _POSITIVE, "tensorboard": _FLAG},
    "sample": {"steps": _COUNT, "solver": _one_of(SOLVERS), "guidance": _number(),
               "decoder": _one_of(DECODERS), "quantize": _one_of(QUANTIZE),
               "compile": _FLAG, "autocast": _one_of(AUTOCAST),
               "context_noise": _CONTEXT_NOISE, "composite": _one_of(COMPOSITES),
               "paint_blend": _NONNEGATIVE, "paint_yield": _FRACTION,
               "paint_view": _one_of(PAINT_VIEWS)},
    "distill": {"recipe": _one_of(RECIPES), "student_steps": _COUNT,
                "teacher_steps": _COUNT, "steps": _COUNT, "batch_size": _COUNT,
                "lr": _POSITIVE, "critic_lr": _POSITIVE, "critic_ratio": _COUNT,
                "grad_chunks": _COUNT, "pairs": _COUNT,
                "ema_decay": _number(">= 0 and < 1", lambda v: 0 <= v < 1), "seed": _INDEX},
    "memory": {"sink": _FLAG, "retrieve": _INDEX, "cache3d": _one_of(CACHE3D),
               "cache_stride": _COUNT, "cache_points": _COUNT},
}


def uses_memory(memory: "MemoryConfig") -> bool:
    """Whether a memory section switches anything on."""
    return memory.sink or memory.retrieve > 0 or memory.cache3d != "off"


def memory_model_fields(memory: "MemoryConfig", model: "ModelConfig", tokens_per_frame: int
                        ) -> dict:
    """The model fields a memory section needs: memory_tokens (every sink and retrieved
    chunk's tokens at model.memory_compress) and cache_latent, for `tokens_per_frame` latent
    patches per frame."""
    chunks = int(memory.sink) + memory.retrieve
    per_chunk = model.chunk_frames * tokens_per_frame // model.memory_compress
    return {"memory_tokens": chunks * per_chunk, "cache_latent": memory.cache3d != "off"}


def check_sampling_steps(cfg: "WorldConfig", steps: int) -> None:
    """Warn when a distilled world (a few-step student) is sampled with a step count it was
    not trained for."""
    d = cfg.distill
    if d.recipe != "none" and steps != d.student_steps:
        warnings.warn(f"this world is a {d.student_steps}-step student ({d.recipe}); sampling "
                      f"it with steps={steps} is outside what it was trained for",
                      stacklevel=3)


def validate_config(cfg: "WorldConfig") -> "WorldConfig":
    """Raise ValueError naming the first field of `cfg` that breaks its rule in RULES or a
    rule between fields; return `cfg` unchanged."""
    for section, rules in RULES.items():
        for name, (kind, is_kind, bound, in_bound) in rules.items():
            value = getattr(getattr(cfg, section), name)
            if not is_kind(value):
                raise ValueError(f"config {section}.{name} must be {kind}, got {value!r} "
                                 f"({type(value).__name__})")
            if in_bound is not None and not in_bound(value):
                raise ValueError(f"config {section}.{name} must be {bound}, got {value!r}")
    m, ae = cfg.model, cfg.autoencoder
    if m.width % m.heads or (m.width // m.heads) % 2 or m.width // m.heads < 6:
        raise ValueError(f"config model.width={m.width} must be model.heads={m.heads} times "
                         f"an even head dim >= 6 (3D RoPE rotates pairs on 3 axes)")
    tc = cfg.train
    anti_drift = {"context_corruption": tc.context_corruption != "none",
                  "context_noise": tc.context_noise > 0,
                  "self_rollout_prob": tc.self_rollout_prob > 0}
    on = [name for name, used in anti_drift.items() if used]
    if on and tc.forcing != "teacher":
        raise ValueError(f"config train.{on[0]} changes the context chunks, which needs "
                         f"train.forcing='teacher' (clean context, loss on the last chunk); "
                         f"got train.forcing={tc.forcing!r}")
    if cfg.sample.context_noise > 0 and tc.context_noise == 0:
        raise ValueError(f"config sample.context_noise={cfg.sample.context_noise} noises each "
                         f"generated chunk before it becomes context, which this world was "
                         f"never trained to read (train.context_noise is 0): set it to 0, "
                         f"or fine-tune with the context_noise method")
    mem = cfg.memory
    if tc.self_rollout_chunks and not tc.self_rollout_prob:
        raise ValueError(f"config train.self_rollout_chunks={tc.self_rollout_chunks} rolls "
                         f"out before the clip on the steps of train.self_rollout_prob, which "
                         f"is 0: set it above 0 or the chunks to 0")
    if tc.self_rollout_chunks and (mem.sink or mem.retrieve or mem.cache3d != "off"):
        raise ValueError(f"config train.self_rollout_chunks={tc.self_rollout_chunks} crops "
                         f"the clip after the rollout, which a world with memory cannot (its "
                         f"memory inputs follow the whole clip): set it to 0")
    if tc.memory_own_prob and not mem.retrieve:
        raise ValueError(f"config train.memory_own_prob={tc.memory_own_prob} generates the "
                         f"retrieved memory chunks, but memory.retrieve is 0: retrieve a "
                         f"chunk or set it to 0")
    if (mem.sink or mem.retrieve) and m.memory_tokens == 0:
        raise ValueError(f"config memory.sink={mem.sink} / memory.retrieve={mem.retrieve} "
                         f"need memory attention: model.memory_tokens must be > 0 "
                         f"(memory_model_fields gives it), got 0")
    if cfg.sample.composite == "cache" and mem.cache3d == "off":
        raise ValueError("config sample.composite='cache' paints the 3D cache's render into "
                         "the frames, but memory.cache3d is 'off': a world without a 3D "
                         "cache has nothing to paint")
    if cfg.sample.paint_view != "off" and cfg.sample.composite != "cache":
        raise ValueError(f"config sample.paint_view={cfg.sample.paint_view!r} paints the engine's "
                         f"last frame into the next chunk, but sample.composite is "
                         f"{cfg.sample.composite!r}: set it to 'cache'")
    if m.cache_latent and mem.cache3d == "off":
        raise ValueError("config model.cache_latent=True reads a 3D cache's render every "
                         "chunk, but memory.cache3d is 'off': set it to 'own' or 'oracle'")
    if mem.cache3d != "off" and not m.cache_latent and cfg.sample.composite != "cache":
        raise ValueError(f"config memory.cache3d={mem.cache3d!r} needs "
                         f"model.cache_latent=True (the model reads the cache), or "
                         f"sample.composite='cache' (the cache only paints), got neither")
    odd = [c for c in ae.block_out_channels if c % ae.norm_num_groups]
    if odd:  # every block is group-normed over its channels
        raise ValueError(f"config autoencoder.block_out_channels {list(ae.block_out_channels)} "
                         f"must all be multiples of autoencoder.norm_num_groups="
                         f"{ae.norm_num_groups}, got {odd[0]}")
    return cfg


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
        "distill": {"student_steps": 2, "teacher_steps": 4, "steps": 4, "batch_size": 2,
                    "critic_ratio": 2, "pairs": 8},
    },
    "small": {},
    "base": {
        # random starts over freedoom2's training maps (engines.doom.TRAIN_MAPS), no deaths:
        # from the player start, long walks reach rooms no episode saw and monsters end
        # most of them
        "data": {"size": 128, "episodes": 2000, "frames": 128, "clip_chunks": 8, "workers": 8,
                 "map": "MAP01+MAP02+MAP03", "start": "random", "monsters": "invulnerable"},
        "autoencoder": {"block_out_channels": (64, 128, 256, 256), "latent_channels": 16,
                        "layers_per_block": 2, "norm_num_groups": 32},
        "model": {"width": 768, "depth": 12, "heads": 12, "patch_size": 2, "window_chunks": 16},
        "train": {"steps": 100_000, "batch_size": 32, "mixed_precision": "bf16",
                  "grad_checkpointing": True},
    },
    "large": {
        "data": {"size": 256, "episodes": 20_000, "frames": 256, "clip_chunks": 8,
                 "workers": 32, "map": "MAP01+MAP02+MAP03", "start": "random",
                 "monsters": "invulnerable"},
        "autoencoder": {"block_out_channels": (128, 256, 512, 512), "latent_channels": 16,
                        "layers_per_block": 2, "norm_num_groups": 32},
        "model": {"width": 1536, "depth": 24, "heads": 24, "patch_size": 2,
                  "window_chunks": 16},
        "train": {"steps": 400_000, "batch_size": 256, "mixed_precision": "bf16",
                  "grad_checkpointing": True},
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
    channels = built["autoencoder"].block_out_channels
    if isinstance(channels, list):  # JSON has no tuples; validate_config rejects the rest
        built["autoencoder"] = dataclasses.replace(built["autoencoder"],
                                                   block_out_channels=tuple(channels))
    return validate_config(WorldConfig(preset=preset, **built))


# ----------------------------------------------------------------------------------------
# Named recipes: a preset plus the overrides of one shipped world's training
# ----------------------------------------------------------------------------------------

# `train world --recipe NAME` (then `--set` on top). Named WORLD_RECIPES because RECIPES
# above is distillation's. Values are `make_config` overrides, so a value that is not a
# config field fails there, naming the recipe.
_CPU_WORLD = {  # the architecture every CPU-trained DOOM world shares (~3.6 M parameters)
    "model__patch_size": 2, "model__width": 192, "model__depth": 4,
    "train__batch_size": 32, "train__forcing": "teacher", "train__ema_decay": 0.995,
}
WORLD_RECIPES: dict[str, tuple[str, dict[str, Any]]] = {
    # doom64_v1's world, stages 1-2 (experiments/doom64_v1.yaml): one-chunk context
    "cpu_world": ("small", {**_CPU_WORLD, "model__window_chunks": 1, "data__clip_chunks": 2,
                            "train__lr": 5e-4, "train__warmup_steps": 100,
                            "train__checkpoint_every": 250}),
    # its stage 3: a three-chunk context from stage 2's EMA weights; 16 sampling steps
    # were chosen on validation seeds
    "cpu_world_window3": ("small", {**_CPU_WORLD, "model__window_chunks": 3,
                                    "data__clip_chunks": 4, "train__lr": 1.5e-4,
                                    "train__warmup_steps": 50, "train__checkpoint_every": 200,
                                    "sample__steps": 16}),
    # doom64_teacher's: doom64_v1 fine-tuned on the whole level; every world fine-tuned or
    # moved from doom64_teacher's weights uses it, so its model fields must match
    "level_world": ("small", {**_CPU_WORLD, "model__window_chunks": 3, "data__clip_chunks": 4,
                              "train__lr": 3e-4, "train__warmup_steps": 50,
                              "sample__steps": 16}),
}
# proc64's teacher: the level world's recipe from doom64_teacher's weights, 800 steps
WORLD_RECIPES["procedural_world"] = ("small", {**WORLD_RECIPES["level_world"][1],
                                               "train__steps": 800,
                                               "train__checkpoint_every": 100})


def recipe_config(name: str, **overrides: Any) -> WorldConfig:
    """The config of a named recipe (its preset and overrides), then `overrides` on top.

    >>> recipe_config("level_world").model.width
    192
    >>> recipe_config("level_world", train__lr=1e-4).train.lr
    0.0001
    """
    if name not in WORLD_RECIPES:
        raise ValueError(f"unknown recipe {name!r}; expected one of {sorted(WORLD_RECIPES)}")
    preset, values = WORLD_RECIPES[name]
    try:  # the recipe alone first, so its own bad value is blamed on it
        make_config(preset, **values)
    except ValueError as e:
        raise ValueError(f"recipe {name!r}: {e}") from e
    return make_config(preset, **{**values, **overrides})
