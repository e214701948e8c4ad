"""A trained world on disk: autoencoder + world model + config, loaded in one line.

    world = wl.pretrained.load_world(wl.DATA / "checkpoints" / "doom64")

Layout of a world directory (every weight file is safetensors, every config JSON):

    <dir>/autoencoder/      VideoAutoencoder.save_pretrained
    <dir>/world/            WorldModel.save_pretrained
    <dir>/world_config.json the WorldConfig it was trained with (preset, data, sample, ...)
    <dir>/captions.safetensors  optional: caption embeddings computed at training time, so
                                the prompts it was trained on need no text encoder
    <dir>/fast_decoder/     optional: FastDecoder.save_pretrained, a small decoder distilled
                            from the autoencoder's (`train decoder`), used for play when
                            `sample.decoder` is "fast"
    <dir>/depth_head/       optional: DepthHead.save_pretrained, depth from the model's own
                            frames for a memory world's 3D cache (`memory.cache3d="own"`)

`World` bundles the pieces with the conversions every front end needs (uint8 frames <->
latents, captions -> embeddings) and is shared by evaluation and play.

Loading is all-or-nothing and every error names the file: JSON and safetensors files are
read whole and checked (the world config against `config.validate_config`, every tensor
against the model its config.json builds: names, shapes, dtypes) before a model is made.
The checked readers live in the leaf `worldlab.loading`, shared with the training
checkpoints and the model's own loader.

Shape legend: t frames, c latent channels, h w height/width, n chunks, k = 3, e = 384.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .atomic import atomic_dir
from .config import WorldConfig, memory_model_fields
from .loading import load_module, read_json
from .model.autoencoder import VideoAutoencoder, frames_to_tensor, tensor_to_frames
from .model.depth_head import DepthHead
from .model.dit import WorldModel
from .model.fast_decoder import FastDecoder, check_decoder_pair
from .model.inference import prepare_for_inference, with_overrides
from .model.textenc import CaptionTable
from .paths import DATA, ROOT, RUNS
from .retired import how_to_restore

CAPTIONS_FILE = "captions.safetensors"
FAST_DECODER = "fast_decoder"  # the optional subfolder of a world directory
DEPTH_HEAD = "depth_head"  # another: a memory world's depth head (memory.cache3d="own")
DEFAULT_WORLD = Path("data") / "checkpoints" / "doom64"  # the shipped world, under ROOT


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:i]', got {device!r}")
    return torch.device(device)


@dataclass
class World:
    ae: torch.nn.Module
    model: torch.nn.Module
    config: WorldConfig
    device: torch.device
    path: Path | None = None
    captions: CaptionTable = field(default_factory=CaptionTable)
    fast_decoder: torch.nn.Module | None = None  # a FastDecoder of ae's latents, or None
    depth_head: torch.nn.Module | None = None  # frames -> depth, for memory.cache3d="own"

    @property
    def chunk_frames(self) -> int:
        return self.model.config.chunk_frames

    @property
    def size(self) -> int:
        return self.model.config.latent_size * self.ae.downsample

    def encode(self, rgb: np.ndarray) -> torch.Tensor:
        """uint8 frames (t, h, w, 3) -> latents (1, t, c, h', w') on the world's device."""
        rgb = np.asarray(rgb)
        if rgb.ndim != 4 or rgb.shape[1:] != (self.size, self.size, 3):
            raise ValueError(f"frames must be uint8 (t, {self.size}, {self.size}, 3), got "
                             f"{rgb.dtype} {rgb.shape}")
        return self.ae.encode(frames_to_tensor(rgb)[None].to(self.device))

    @property
    def decoder(self) -> torch.nn.Module:
        """What `decode` uses: the autoencoder when config.sample.decoder is "full", the
        fast decoder when it is "fast" (a World without a config decodes with its
        autoencoder)."""
        if self.config is None or self.config.sample.decoder == "full":
            return self.ae
        if self.fast_decoder is None:
            raise ValueError(f"world {self.path}: sample.decoder is "
                             f"{self.config.sample.decoder!r} but the world has no fast "
                             f"decoder (expected {FAST_DECODER}/ in its directory)")
        return self.fast_decoder

    def decode(self, latents: torch.Tensor) -> np.ndarray:
        """Latents (1, t, c, h', w') -> uint8 frames (t, h, w, 3), by `decoder`."""
        return tensor_to_frames(self.decoder.decode(latents)[0])

    def embed(self, captions: list[tuple[str, str, str]]) -> torch.Tensor:
        """n captions (scene, character, event) -> (1, n, 3, e) on the world's device."""
        return self.captions.embed([captions]).to(self.device)


def shipped_captions() -> CaptionTable:
    """The default world's caption table (empty if it is not there): the prompts DOOM
    recordings and play use, embedded, for worlds that have none of their own (a fresh
    preset being timed), so the text encoder need not load just to be timed."""
    path = ROOT / DEFAULT_WORLD / CAPTIONS_FILE
    return CaptionTable.load(path) if path.exists() else CaptionTable()


# ----------------------------------------------------------------------------------------
# Paths: one rule for every loader
# ----------------------------------------------------------------------------------------


def find_dir(path, what: str, made_by: str | None = None) -> Path:
    """The directory `path` names: an absolute path as it is; a relative one from the current
    directory if it is there, else from the repository root, so "data/checkpoints/doom64"
    names the same world from the root, notebooks/ or tutorials/. Nothing is downloaded: a
    missing directory raises FileNotFoundError naming every directory looked in, the
    neighbours of a misspelt name, and what makes it (`made_by`, e.g. the notebook to run
    first; by default the rule for runs/ or data/)."""
    p = Path(path).expanduser()
    for t in (p,) if p.is_absolute() else (p, ROOT / p):
        if t.is_dir():
            return t  # as given when it is there: paths written into records stay as typed
    tried = list(dict.fromkeys([p.absolute(), ROOT / p]))
    near = next((t.parent for t in tried if t.parent.is_dir()), None)
    there = sorted(c.name for c in near.iterdir() if c.is_dir())[:12] if near else []
    listing = f"; {near} holds {', '.join(there)}" if there else ""
    raise FileNotFoundError(f"no {what} directory {str(path)!r}: looked in "
                            f"{', '.join(map(str, tried))}{listing}. {made_by or _made_by(tried)}")


def _made_by(tried: list[Path]) -> str:
    """Where a missing directory would come from, by the room it was looked for in."""
    resolved = [t.resolve() for t in tried]
    if any(t.is_relative_to(RUNS) for t in resolved):
        return ("runs/ holds what the notebooks and `python -m worldlab train ...` write: run "
                "the notebook or command that makes it first")
    if any(t.is_relative_to(DATA) for t in resolved):
        retired = next(filter(None, map(how_to_restore, resolved)), None)
        return retired or "data/ ships with the repository (see data/README.md): check the name"
    return "check the path"


def resolve_checkpoint(path=None, made_by: str | None = None) -> Path:
    """A world directory: `path` (found by `find_dir`'s rule) or the shipped default world;
    a clear error if it is missing or is not a world directory."""
    p = find_dir(path if path is not None else DEFAULT_WORLD, "world", made_by)
    if not (p / "world_config.json").is_file():
        raise FileNotFoundError(f"no world checkpoint at {p}: expected autoencoder/, world/ "
                                f"and world_config.json (see worldlab.pretrained)")
    return p


def load_autoencoder(path, made_by: str | None = None, device: str = "cpu"):
    """A VideoAutoencoder save_pretrained directory (e.g. runs/02_autoencoder/model, or a
    world's autoencoder/), found by `find_dir`'s rule and loaded checked, in float32 and eval
    mode. diffusers' own `from_pretrained` would take a missing directory for a model hub id
    and try the network; this names the directory and what makes it (`made_by`)."""
    p = find_dir(path, "autoencoder", made_by)
    if not (p / "config.json").is_file():
        raise FileNotFoundError(f"{p} is not an autoencoder directory: config.json is missing "
                                f"(expected VideoAutoencoder.save_pretrained's files)")
    return load_module(VideoAutoencoder, p).float().to(resolve_device(device)).eval()


def named_world(spec: str) -> tuple[str, str]:
    """A `NAME=DIR` spec (the `--model` of `eval` and `bench memory`) split into its name
    and world directory; a ValueError naming the spec when either is missing."""
    name, sep, path = spec.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise ValueError(f"--model expects NAME=DIR, got {spec!r}")
    return name.strip(), path.strip()


def load_world(path: str | Path, device: str = "auto", subfolder: str = "world",
               decoder: str | None = None, sample: dict | None = None,
               memory: dict | None = None) -> World:
    """Load a world directory (see the module docstring; `path` is found by `find_dir`'s
    rule, so a relative one also works from notebooks/); `subfolder` picks e.g. "ema".

    Its fast decoder is loaded when the directory has one; `decoder` ("full" | "fast")
    overrides the config's sample.decoder, and "fast" needs a fast decoder. `sample`
    overrides fields of the config's sample section (e.g. {"quantize": "int8"}), `memory`
    of its memory section (PAINT with sample {"composite": "cache"}: a cache that only
    paints, read by no model); the inference switches are then applied
    (`model.inference.prepare_for_inference`).
    """
    path = find_dir(path, "world")  # the same path rule as every loader
    for part in ("autoencoder", subfolder, "world_config.json"):
        if not (path / part).exists():
            raise ValueError(f"{path} is not a world directory: {part} is missing (expected "
                             f"autoencoder/, {subfolder}/ and world_config.json)")
    dev = resolve_device(device)
    cfg = with_overrides(read_world_config(path / "world_config.json"), sample, memory)
    if decoder is not None:  # one more sample override, validated as the others
        cfg = with_overrides(cfg, {"decoder": decoder})
    has_fast = (path / FAST_DECODER).exists()
    if cfg.sample.decoder == "fast" and not has_fast:
        raise ValueError(f"the fast decoder was asked for but {path / FAST_DECODER} does not "
                         f"exist (expected a FastDecoder save_pretrained directory, from "
                         f"`train decoder` packaged with package_world(fast_decoder=...))")
    # shipped weights may be float16 (half the size); compute in float32
    ae = load_module(VideoAutoencoder, path / "autoencoder").float().to(dev)
    model = load_module(WorldModel, path / subfolder).float().to(dev)
    if model.config.latent_channels != ae.config.latent_channels:
        raise ValueError(f"world {path}: {subfolder}/ expects {model.config.latent_channels} "
                         f"latent channels but autoencoder/ makes {ae.config.latent_channels}")
    check_memory_fits(cfg, model, path)
    fast = None
    if has_fast:
        fast = load_module(FastDecoder, path / FAST_DECODER).float().to(dev)
        check_decoder_pair(ae, fast, path / FAST_DECODER)
    captions = CaptionTable.load(path / CAPTIONS_FILE) if (path / CAPTIONS_FILE).exists() \
        else CaptionTable()
    depth = None
    if (path / DEPTH_HEAD).exists():
        depth = load_module(DepthHead, path / DEPTH_HEAD).float().to(dev).eval()
    elif cfg.memory.cache3d == "own":
        raise ValueError(f"world {path}: memory.cache3d='own' needs its depth head, expected "
                         f"{path / DEPTH_HEAD}/ (package_world(depth_head=...))")
    return prepare_for_inference(World(ae, model, cfg, dev, path, captions, fast, depth))


# a world with a depth head played with its own 3D cache painting what it has seen
# (`memory.stream.Stream.show`), whatever its model reads: load_world(path, **PAINT). The
# cache holds 262,144 points (the default's 65,536 keep about 16 frames): a walk that comes
# back finds what it saw (experiments/long_loops.yaml's scratch: late PSNR on loop walks
# 18.95 -> 19.32 dB, sharpness 0.59 -> 0.90x the engine's), as experiments/default_worlds.yaml
# packages the worlds it scores. The engine's last frame is painted first into the first
# chunk the world makes (sample.paint_view, nearest colours; experiments/default_worlds.yaml
# says how it was chosen on validation walks): the painting doom64's next chunk 24.88 ->
# 25.92 dB there (warp-last 25.32), proc64's 24.54 -> 25.93 (23.62)
PAINT = {"sample": {"composite": "cache", "paint_view": "nearest"},
         "memory": {"cache3d": "own", "cache_points": 262_144}}


def check_memory_fits(cfg: WorldConfig, model: WorldModel, path: Path) -> None:
    """The world config's memory section against the model it drives: enough memory tokens
    for its sink and retrieved chunks, a 3D-cache input exactly when the config's model
    reads one (`config.validate_config` ties that to memory.cache3d: a cache that only
    paints is read by none); a ValueError naming the field otherwise."""
    m = model.config
    need = memory_model_fields(cfg.memory, cfg.model, (m.latent_size // m.patch_size) ** 2)
    if m.memory_tokens < need["memory_tokens"]:
        raise ValueError(f"world {path}: memory.sink={cfg.memory.sink} and memory.retrieve="
                         f"{cfg.memory.retrieve} need {need['memory_tokens']} memory tokens; "
                         f"its model has memory_tokens={m.memory_tokens}")
    if m.cache_latent != cfg.model.cache_latent:
        raise ValueError(f"world {path}: memory.cache3d={cfg.memory.cache3d!r} needs a model "
                         f"with cache_latent={cfg.model.cache_latent}; its model has "
                         f"cache_latent={m.cache_latent}")


def package_world(autoencoder: str | Path, world: str | Path, config: str | Path,
                  out: str | Path, captions: str | Path | None = None, half: bool = True,
                  max_shard_size: str = "10MB", fast_decoder: str | Path | None = None,
                  records: tuple[str | Path, ...] = (), depth_head: str | Path | None = None,
                  sample: dict | None = None, memory: dict | None = None) -> Path:
    """Assemble a world directory from training outputs, atomically.

    autoencoder, world: `save_pretrained` directories (e.g. runs/ae/model, runs/world/ema);
    config: the run's world_config.json; captions: its captions.safetensors; fast_decoder:
    a FastDecoder directory (`train decoder`'s out/model), checked against the autoencoder;
    records: JSON files copied as they are (e.g. a student's distill_run.json); depth_head:
    a DepthHead directory (`train depth-head`'s out/model), what memory.cache3d="own" reads.
    `half` stores float16 weights (loading casts back to float32); shards keep every file
    small. `sample`: sample fields the packaged world_config.json changes, e.g.
    {"decoder": "fast"} for a world that plays with its fast decoder by default; `memory`:
    memory fields, e.g. {"cache3d": "own"} with sample {"composite": "cache"} for a world
    whose model reads no 3D cache but keeps one to paint with.
    """
    cfg = with_overrides(read_world_config(Path(config)), sample, memory)  # validate first
    if cfg.memory.cache3d == "own" and depth_head is None:
        raise ValueError("memory.cache3d='own' fuses the world's frames with its depth head: "
                         "pass depth_head (`train package --depth-head DIR`)")
    if cfg.sample.decoder == "fast" and fast_decoder is None:
        raise ValueError("sample.decoder='fast' needs a fast decoder (fast_decoder=..., "
                         "`train package --fast-decoder DIR`)")
    parts = [(VideoAutoencoder, autoencoder, "autoencoder"), (WorldModel, world, "world")]
    if fast_decoder is not None:
        check_decoder_pair(load_module(VideoAutoencoder, Path(autoencoder)),
                           load_module(FastDecoder, Path(fast_decoder)), Path(fast_decoder))
        parts.append((FastDecoder, fast_decoder, FAST_DECODER))
    if depth_head is not None:
        parts.append((DepthHead, depth_head, DEPTH_HEAD))

    def write(tmp: Path) -> None:
        for cls, src, name in parts:
            m = load_module(cls, Path(src))
            (m.half() if half else m).save_pretrained(tmp / name, safe_serialization=True,
                                                      max_shard_size=max_shard_size)
        if sample is None and memory is None:
            shutil.copy(config, tmp / "world_config.json")
        else:
            (tmp / "world_config.json").write_text(cfg.to_json())
        if captions is not None:
            CaptionTable.load(captions).save(tmp / CAPTIONS_FILE)
        for record in records:
            shutil.copy(record, tmp / Path(record).name)
    return atomic_dir(Path(out), write)


# ----------------------------------------------------------------------------------------
# Readers: a whole file or an error naming it
# ----------------------------------------------------------------------------------------


def read_world_config(path: Path) -> WorldConfig:
    """A world_config.json, validated (see `config.validate_config`); errors name the file."""
    data = read_json(path, "world config")
    try:
        return WorldConfig.from_dict(data)
    except ValueError as e:
        raise ValueError(f"world config {path}: {e}") from None
