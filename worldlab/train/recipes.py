"""The recipes: train the autoencoder, train the world model, package a world.

Each is one public function that the `train` command and the notebooks both call
(`wl.train.autoencoder(...)`, `wl.train.world(...)`, `wl.train.package(...)`); a notebook
adds its plots through `callbacks` (called with fit's state after every step) and
`on_start` (called once with the plan: parameters, items, steps, ...), never a second copy of
the recipe. Nothing here prints or draws.

Shape legend: n frames, t time, c channels, h w height width.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..atomic import atomic_write_json, atomic_write_text
from ..config import AutoencoderConfig, TrainConfig, WorldConfig
from ..episodes import ClipTensors, EpisodeStore, LatentCache, load_frames
from ..loading import load_module, read_model_config
from ..model.autoencoder import (VideoAutoencoder, encode_store, evaluate_autoencoder,
                                 fit_latent_scale, frames_to_tensor, with_more_latent_channels,
                                 without_lowest_level)
from ..model.discriminator import AutoencoderWithCritic, PatchDiscriminator
from ..model.dit import WorldModel
from ..model.textenc import CaptionTable
from ..paths import relative
from ..pretrained import CAPTIONS_FILE, package_world
from .checkpoints import load_weights, save_model_dir
from .hardware import (check_memory, clip_tensor_bytes, latent_geometry, this_machine,
                       train_memory)
from .losses import autoencoder_gan_loss, autoencoder_loss, world_model_loss
from .loop import fit, make_accelerator, steps_for_budget
from .samples import next_chunks, reconstructions
from .sharding import uses_fsdp

LATENT_SCALE_FRAMES, HELD_OUT_FRAMES = 2048, 1024  # frames measured after training
LATENT_SCALE_FIELDS = ("scaling_factor", "shift_factor")  # config fields measured, not chosen
RUN_FILE = "train_run.json"  # a world run's record: steps, seconds, data, device
SAMPLE_FRAMES, SAMPLE_CLIPS = 8, 2  # what a run draws in TensorBoard at each checkpoint


def _n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def seeded(build: Callable, seed: int):
    """`build()` with the global torch RNG seeded by `seed` alone (and restored after), so
    the same config starts from the same weights whatever ran before in the process."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def split_episodes(ids: list[str], holdout: float) -> tuple[list[str], list[str]]:
    """(train ids, held-out ids): the last `holdout` share of the ids (at least one) held out."""
    if not 0.0 < holdout < 1.0:
        raise ValueError(f"holdout must be in (0, 1), got {holdout}")
    if len(ids) < 2:
        raise ValueError(f"need at least 2 episodes to hold one out, the store has {len(ids)}")
    k = min(len(ids) - 1, max(1, round(holdout * len(ids))))
    return ids[:-k], ids[-k:]


# ----------------------------------------------------------------------------------------
# The autoencoder
# ----------------------------------------------------------------------------------------


class FrameDataset(torch.utils.data.Dataset):
    """Single frames for the autoencoder: uint8 (n, h, w, 3) [+ depth (n, h, w)] -> (c, h, w)."""

    def __init__(self, rgb, depth=None):
        self.rgb = np.asarray(rgb)
        self.depth = None if depth is None else np.asarray(depth)
        frames_to_tensor(self.rgb[:1])  # validate the layout once, up front

    def __len__(self) -> int:
        return len(self.rgb)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        d = None if self.depth is None else self.depth[i]
        return {"frames": frames_to_tensor(self.rgb[i], d)}


def autoencoder_train_config(cfg: AutoencoderConfig, **overrides: Any) -> TrainConfig:
    """The TrainConfig that `fit` runs the autoencoder with (steps, lr, batch from `cfg`)."""
    base = dict(steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, weight_decay=0.0,
                warmup_steps=min(200, max(1, cfg.steps // 20)), ema_decay=0.0, seed=cfg.seed)
    base.update(overrides)
    return TrainConfig(**base)


@dataclass
class AutoencoderRun:
    model: VideoAutoencoder  # trained, latents normalised (`fit_latent_scale`), eval mode
    scores: dict  # held-out reconstruction: psnr (dB), ssim, sharpness_ratio, colour_distance
    train_ids: list[str]
    held_ids: list[str]
    state: dict  # fit's last state: step, loss, lr, ...
    discriminator: PatchDiscriminator | None = None  # the critic, when cfg.disc_weight > 0


def autoencoder_trainee(cfg: AutoencoderConfig, seed: int
                        ) -> tuple[VideoAutoencoder, torch.nn.Module, Callable]:
    """(autoencoder, what `fit` trains, its loss_fn): the autoencoder alone with
    `autoencoder_loss`, or with cfg.disc_weight > 0 wrapped with a fresh critic
    (`AutoencoderWithCritic`) with `autoencoder_gan_loss`. The autoencoder's initial
    weights depend on `seed` alone, so runs with and without the critic start alike."""
    ae = seeded(lambda: VideoAutoencoder.from_config_dataclass(cfg), seed)
    if cfg.disc_weight == 0:
        return ae, ae, autoencoder_loss(cfg)
    critic = seeded(lambda: PatchDiscriminator.from_config_dataclass(cfg), seed)
    return ae, AutoencoderWithCritic(ae, critic), autoencoder_gan_loss(cfg)


def load_init(ae: VideoAutoencoder, init: Path) -> None:
    """Start `ae` from the autoencoder at `init`: the same architecture (the latent scale may
    differ, it is measured again); one with one more level (an 8x `init` for a 4x `ae`:
    every weight but its lowest-resolution level's, `without_lowest_level`); or one with
    fewer latent channels (`with_more_latent_channels`: it decodes as `init` does)."""
    saved = read_model_config(init)
    mine = list(ae.config.block_out_channels)
    theirs = saved.get("block_out_channels")
    if isinstance(theirs, list) and theirs[:-1] == mine and theirs[-2:-1] == theirs[-1:]:
        bigger = VideoAutoencoder.from_config(saved)  # checks every tensor of the file
        load_weights(bigger, init, ignore=LATENT_SCALE_FIELDS)
        ae.load_state_dict(without_lowest_level(bigger.state_dict(), len(theirs)))
        return
    channels = saved.get("latent_channels")
    if isinstance(channels, int) and 0 < channels < ae.config.latent_channels:
        narrower = VideoAutoencoder.from_config({**ae.config, "latent_channels": channels})
        load_weights(narrower, init, ignore=LATENT_SCALE_FIELDS)  # same but the channels
        ae.load_state_dict(with_more_latent_channels(ae.state_dict(), narrower.state_dict()))
        return
    load_weights(ae, init, ignore=LATENT_SCALE_FIELDS)


def freeze_encoder(ae: VideoAutoencoder, init) -> None:
    """Keep the encoder (and its latent scale) of the weights at `init` as they are: only the
    decoder will learn, so world models trained on these latents still read them."""
    if init is None:
        raise ValueError("autoencoder.train_encoder=False keeps the encoder as it is: start "
                         "from saved weights (init / --init DIR)")
    saved = read_model_config(Path(init))
    if saved.get("block_out_channels") != list(ae.config.block_out_channels):
        raise ValueError(f"autoencoder.train_encoder=False keeps the encoder of {init}, whose "
                         f"block_out_channels are {saved.get('block_out_channels')}; this "
                         f"autoencoder has {list(ae.config.block_out_channels)}")
    ae.register_to_config(**{k: saved[k] for k in LATENT_SCALE_FIELDS})
    for part in (ae.vae.encoder, ae.vae.quant_conv):
        part.requires_grad_(False)


def autoencoder(store, cfg: AutoencoderConfig, out=None, *, holdout: float = 0.1,
                init=None, minutes: float | None = None, device: str = "auto",
                resume: bool = False,
                callbacks: Iterable[Callable] = (), on_start: Callable | None = None
                ) -> AutoencoderRun:
    """Train the autoencoder on every frame of a store's episodes but the held-out last
    `holdout` share; normalise its latents; score reconstructions of held-out frames.

    `init` (an autoencoder directory, e.g. a packaged world's `autoencoder/`, or one with
    one more level, see `load_init`) starts from its weights with a fresh schedule:
    fine-tuning on new data; with `resume` too, a
    checkpoint in `out` wins (so one command starts or continues such a run). With
    cfg.train_encoder=False only the decoder learns (see `freeze_encoder`). The critic, if
    any, starts fresh from `init`.

    With cfg.disc_weight > 0 it trains against a patch discriminator (see
    `autoencoder_gan_loss`). `minutes` replaces cfg.steps by the count that fits (timed on
    the first steps; with the GAN those are the cheaper warm-up ones, so it runs longer).
    With `out`: checkpoints (resumable), `out/model` (the final autoencoder, alone),
    `out/discriminator` (with the GAN) and `out/metrics.json`.
    """
    store = EpisodeStore.open(store)
    train_ids, held_ids = split_episodes(store.ids(), holdout)
    rgb, depth = load_frames(store, train_ids, cfg.depth_channel)
    tc = autoencoder_train_config(cfg)
    ae, trainee, loss_fn = autoencoder_trainee(cfg, tc.seed)
    if init is not None:
        load_init(ae, Path(init))
    if not cfg.train_encoder:
        freeze_encoder(ae, init)
    data, acc = FrameDataset(rgb, depth), make_accelerator(tc, device, out)
    if minutes:
        tc = autoencoder_train_config(
            cfg, steps=steps_for_budget(trainee, data, tc, loss_fn, minutes, acc))
    if on_start is not None:
        critic_size = _n_params(trainee) - _n_params(ae)  # 0 without the GAN
        on_start({"parameters": _n_params(ae), "critic_parameters": critic_size,
                  "frames": len(rgb), "episodes": len(train_ids), "steps": tc.steps})
    held_rgb, held_depth = load_frames(store, held_ids, cfg.depth_channel)
    shown = SAMPLE_FRAMES  # TensorBoard's samples: held-out frames over their reconstructions
    state = fit(trainee, data, tc, loss_fn, callbacks=callbacks, out_dir=out, resume=resume,
                accelerator=acc, samples=reconstructions(frames_to_tensor(
                    held_rgb[:shown], None if held_depth is None else held_depth[:shown])))
    ae.eval()
    n = LATENT_SCALE_FRAMES
    if cfg.train_encoder:  # else the latents are the init's, and so is their scale
        fit_latent_scale(ae, frames_to_tensor(rgb[:n], None if depth is None else depth[:n]))
    n = HELD_OUT_FRAMES
    scores = evaluate_autoencoder(ae, frames_to_tensor(
        held_rgb[:n], None if held_depth is None else held_depth[:n]))
    critic = trainee.discriminator if trainee is not ae else None
    if out is not None:  # fit saved what it trained as out/model: the autoencoder replaces it
        save_model_dir(ae, Path(out) / "model")
        if critic is not None:
            save_model_dir(critic, Path(out) / "discriminator")
        atomic_write_json(Path(out) / "metrics.json", scores)
    return AutoencoderRun(ae, scores, train_ids, held_ids, state, critic)


# ----------------------------------------------------------------------------------------
# The world model
# ----------------------------------------------------------------------------------------


@dataclass
class WorldRun:
    model: WorldModel  # the trained weights (train mode)
    ema: WorldModel | None  # the EMA copy (what a world ships), None if ema_decay = 0
    config: WorldConfig  # as trained: the data section describes the episodes it read
    captions: CaptionTable | None  # every caption seen in training, None without text
    latents: LatentCache
    clips: ClipTensors  # every training clip, as tensors on the device it trained on
    state: dict  # fit's last state


def fill_latents(store: EpisodeStore, latents: LatentCache, autoencoder, device) -> int:
    """Encode the episodes of `store` missing from `latents`; returns how many."""
    if all(latents.has(i) for i in store.ids()):
        return 0
    if autoencoder is None:
        raise ValueError(f"the latent cache {latents.root} is incomplete; pass the "
                         f"autoencoder (a directory or a VideoAutoencoder) to fill it")
    ae = autoencoder if isinstance(autoencoder, VideoAutoencoder) else \
        load_module(VideoAutoencoder, autoencoder)
    return encode_store(ae.to(device).eval(), store, latents)


def trained_on(cfg: WorldConfig, store: EpisodeStore, ids: list[str]) -> WorldConfig:
    """A copy of `cfg` whose data section describes episodes `ids` of `store`."""
    seen = {k: v for k, v in store.describe(ids).items() if v is not None}
    return dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, **seen))


def _caption_table(captions, text: bool) -> CaptionTable | None:
    if not text:
        return None
    if isinstance(captions, CaptionTable):
        return captions
    return CaptionTable.load(captions) if captions is not None else CaptionTable()


def world(store, cfg: WorldConfig, out=None, *, autoencoder=None, latents=None,
          ids: list[str] | None = None, text: bool = True, captions=None, init=None,
          minutes: float | None = None, device: str = "auto", resume: bool = False,
          callbacks: Iterable[Callable] = (), on_start: Callable | None = None,
          clips: Callable | None = None, load_init: Callable | None = None) -> WorldRun:
    """Train the world model on clips of episodes `ids` (default: all) of a store.

    Latents come from `latents` (a LatentCache or directory; default `<store>/latents`),
    filled with `autoencoder` where missing. `captions` is a table (or its file) to start
    from; `text=False` trains without captions. `init` starts from saved weights with a
    fresh schedule (the context window may differ). `minutes` replaces cfg.train.steps by
    the count that fits. With `out`: checkpoints (resumable), `model/`, `ema/`,
    `world_config.json` and `captions.safetensors`, what `package` assembles.
    `clips(store, cache, ids, device)` builds another clip set (the memory recipe's, with
    each clip's memory) and `load_init(model, init)` another way to start from `init`
    (default: the same architecture, `load_weights`).

    A config too big for the device's memory fails before anything is read (see
    `hardware`). The clips are loaded once as tensors (`ClipTensors`) on the training
    device, or in CPU memory when they would crowd the model out of the GPU.
    """
    store = EpisodeStore.open(store)
    ids = sorted(store.index) if ids is None else list(ids)
    cfg = trained_on(WorldConfig.from_dict(cfg.to_dict()), store, ids)  # a copy
    if init is not None and resume:
        raise ValueError("init starts a new run and resume continues one; pass one")
    acc = make_accelerator(cfg.train, device, out)
    cache = latents if isinstance(latents, LatentCache) else \
        LatentCache(latents if latents is not None else store.root / "latents")
    data_device = _fits(cfg, store, ids, cache, acc)
    with acc.main_process_first():  # one process encodes, the others find them cached
        encoded = fill_latents(store, cache, autoencoder, acc.device)
    sample = cache.get(ids[0])  # (t, c, h', w')
    model = seeded(lambda: WorldModel.from_config_dataclass(cfg.model, sample.shape[1],
                                                            sample.shape[-1]), cfg.train.seed)
    if init is not None and load_init is not None:
        load_init(model, Path(init))
    elif init is not None:
        load_weights(model, Path(init), ignore=("window_chunks",))  # no weight uses it
    f = cfg.model.chunk_frames
    clips = clips(store, cache, ids, data_device) if clips is not None else \
        ClipTensors(store, cache, chunk_frames=f, stride=f, ids=ids, device=data_device,
                    clip_frames=f * (cfg.data.clip_chunks + cfg.train.self_rollout_chunks))
    table = _caption_table(captions, text)
    loss_fn = world_model_loss(cfg.train, f, table, clips.captions)
    if minutes:
        cfg.train.steps = steps_for_budget(model, clips, cfg.train, loss_fn, minutes, acc)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(out) / "world_config.json", cfg.to_json())
    if on_start is not None:
        on_start({"parameters": _n_params(model), "clips": len(clips), "steps": cfg.train.steps,
                  "encoded": encoded, "latents": str(cache.root)})
    t0 = time.perf_counter()
    state = fit(model, clips, cfg.train, loss_fn, callbacks=callbacks, out_dir=out,
                resume=resume, accelerator=acc,
                samples=_world_samples(clips, autoencoder, cfg.sample.steps))
    if out is not None:  # what the run cost, packaged with the world (a table's budget)
        atomic_write_json(Path(out) / RUN_FILE, {
            "steps": cfg.train.steps, "batch_size": cfg.train.batch_size,
            "seconds": time.perf_counter() - t0, "resumed": resume, "clips": len(clips),
            "episodes": len(ids), "device": str(acc.device),
            "threads": torch.get_num_threads(),
            "init": None if init is None else relative(init)})
    if table is not None and out is not None:
        table.save(Path(out) / CAPTIONS_FILE)
    return WorldRun(state["model"], state["ema"], cfg, table, cache, clips, state)


def _world_samples(clips, autoencoder, steps: int) -> Callable | None:
    """TensorBoard's samples of a world run: the first clips' last chunks, engine over world,
    decoded; none without an autoencoder to decode them (latents read from a cache)."""
    if autoencoder is None or not len(clips):
        return None
    ae = autoencoder if isinstance(autoencoder, VideoAutoencoder) else \
        load_module(VideoAutoencoder, autoencoder)
    return next_chunks(clips.gather(list(range(min(SAMPLE_CLIPS, len(clips))))), ae, steps)


def _fits(cfg: WorldConfig, store: EpisodeStore, ids: list[str], cache: LatentCache,
          acc) -> torch.device:
    """Check that training `cfg` fits the device (a ValueError with the estimate if not);
    return where the clip tensors go: the device if they fit beside it, else the CPU."""
    channels, size = (cache.get(ids[0]).shape[1], cache.get(ids[0]).shape[-1]) \
        if cache.has(ids[0]) else latent_geometry(cfg)
    machine = this_machine(acc.device.type)
    shape = dict(processes=acc.num_processes, sharded=uses_fsdp(acc),
                 cuda=machine.kind == "cuda")
    estimate = check_memory(train_memory(cfg, channels, size, **shape), machine,
                            f"training the world model ({cfg.preset} preset)")
    frames = sum(store.index[i]["frames"] for i in ids)
    data = clip_tensor_bytes(frames, channels, size)
    return acc.device if estimate["total"] + data <= machine.memory_bytes \
        else torch.device("cpu")


def package(autoencoder, run, out, weights: str = "ema", half: bool = True,
            fast_decoder=None, depth_head=None, sample: dict | None = None,
            memory: dict | None = None) -> Path:
    """A world directory (see `worldlab.pretrained`) from an autoencoder directory and a
    world run directory (`world(..., out=run)` or `distill(..., out=run)`): its `weights`
    subfolder, its config, its captions and its records when it has them (a student's
    `distill_run.json`, a world run's `train_run.json`),
    and a fast decoder (`train decoder`'s out/model) and a depth head (`train depth-head`'s
    out/model) when given; `sample` and `memory` change fields of the packaged config's
    sample and memory sections (`package_world`)."""
    run = Path(run)
    captions = run / CAPTIONS_FILE
    records = tuple(r for r in (run / "distill_run.json", run / RUN_FILE) if r.exists())
    return package_world(autoencoder, run / weights, run / "world_config.json", out,
                         captions if captions.exists() else None, half=half,
                         fast_decoder=fast_decoder, depth_head=depth_head,
                         records=records, sample=sample, memory=memory)
