"""Training speed (`python -m worldlab bench train --preset P [--device D]`): steps/s,
samples/s, and `data_wait_fraction`, the share of step time spent waiting for the batch.

Two loaders train the same model on the same clips in one run, so their numbers are a
ratio taken on one machine: `tensors` (`ClipTensors`: every clip on the device, gathered
by index; what `train.world` trains on) and `episodes` (`EpisodeClips` read item by item
through a DataLoader and collated in Python, episodes preloaded: the path before it).
With `compile`, a third row times `tensors` under torch.compile. `sdpa_fused` says whether
attention ran in a fused kernel (flash, memory-efficient or cuDNN) rather than the math one.

Data: the first `episodes` episodes of a store (`data`, e.g. one `train world` read, with
its `latents`), or as many episodes recorded by the bench itself with the preset's engine,
size and length under runs/bench/data (reused). The `tensors` speed does not depend on
how many; the `episodes` loader first reads them all (`load_s`).
Latents missing from `latents` are encoded by a fresh, seeded autoencoder of the preset:
speed does not depend on the weights. Speeds are measured, never asserted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time

import torch

from ..config import WorldConfig, make_config
from ..episodes import ClipTensors, EpisodeClips, EpisodeStore, LatentCache, collate_clips
from ..episodes.recording import record_many
from ..model.autoencoder import VideoAutoencoder
from ..model.dit import WorldModel
from ..pretrained import shipped_captions
from ..paths import RUNS
from ..train import fit, make_accelerator, world_model_loss
from ..train.recipes import fill_latents, seeded
from .report import print_table

WARMUP_STEPS = 3  # untimed: allocation, kernel selection, the text model loading


def bench_store(cfg: WorldConfig, data=None, episodes: int = 64) -> EpisodeStore:
    """`data`, or `episodes` episodes of the preset's engine, size and length recorded
    under runs/bench/data (kept: the next run reuses them)."""
    if data is not None:
        store = EpisodeStore.open(data)
        if not store.ids():
            raise ValueError(f"the store {store.root} has no episodes to train on")
        return store
    d = cfg.data
    store = EpisodeStore(RUNS / "bench" / "data" / f"{d.engine}-{d.size}px-{episodes}x{d.frames}")
    if len(store.ids()) < episodes:
        record_many(store, d.engine, list(range(episodes)), d.frames, d.size, d.policy,
                    d.event_rate, workers=d.workers, overwrite=True)
    return store


def bench_latents(cfg: WorldConfig, store: EpisodeStore, latents=None, device="cpu"
                  ) -> LatentCache:
    """`latents` (default: a cache under runs/bench/latents for this store and preset),
    whatever is missing encoded by a fresh autoencoder of the preset."""
    if latents is None:
        tag = hashlib.sha1(str(store.root.resolve()).encode()).hexdigest()[:8]
        latents = RUNS / "bench" / "latents" / f"{store.root.name}-{tag}-{cfg.preset}"
    cache = LatentCache(latents)
    ae = seeded(lambda: VideoAutoencoder.from_config_dataclass(cfg.autoencoder), 0)
    fill_latents(store, cache, ae, device)
    return cache


def time_fit(cfg: WorldConfig, geometry: tuple[int, int], dataset, loss_fn, acc, steps: int,
             collate_fn=None) -> dict:
    """Train a fresh model (latents of `geometry` = (channels, size)) for WARMUP_STEPS +
    `steps` steps; speeds over the last `steps`."""
    model = seeded(lambda: WorldModel.from_config_dataclass(cfg.model, *geometry),
                   cfg.train.seed)
    ticks, waits = [], []

    def tick(state: dict) -> None:
        ticks.append(time.perf_counter())
        waits.append(state["data_s"])

    tc = dataclasses.replace(cfg.train, steps=WARMUP_STEPS + steps)
    cuda = acc.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    fit(model, dataset, tc, loss_fn, callbacks=[tick], accelerator=acc, collate_fn=collate_fn)
    elapsed = ticks[-1] - ticks[WARMUP_STEPS - 1]
    steps_per_s = steps / elapsed
    return {"steps_per_s": steps_per_s,
            "samples_per_s": steps_per_s * tc.batch_size * acc.num_processes,
            "data_wait_fraction": sum(waits[WARMUP_STEPS:]) / elapsed,
            # what would cap a faster device: 1000 / this is the most steps/s the data allows
            "data_ms_per_step": 1000 * sum(waits[WARMUP_STEPS:]) / steps,
            "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None}


def fused_attention(cfg: WorldConfig, geometry: tuple[int, int], device) -> bool:
    """Whether the model's attention (block-causal mask included) runs in a fused
    scaled_dot_product_attention kernel on `device`: one forward pass of a clip with the
    unfused math kernel switched off, under the config's autocast."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model = WorldModel.from_config_dataclass(cfg.model, *geometry).to(device)
    f, n = cfg.model.chunk_frames * cfg.data.clip_chunks, cfg.data.clip_chunks
    x = torch.randn(1, f, geometry[0], geometry[1], geometry[1], device=device)
    poses = torch.eye(4, device=device).expand(1, f, 4, 4)
    fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
             SDPBackend.CUDNN_ATTENTION]
    bf16 = cfg.train.mixed_precision == "bf16" and device.type == "cuda"
    try:
        with sdpa_kernel(fused), torch.no_grad(), \
                torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            model(x, torch.rand(1, n, device=device), c2w=poses,
                  actions=torch.zeros(1, f, cfg.model.action_width, device=device))
    except RuntimeError:  # "No available kernel": only the math kernel takes these inputs
        return False
    return True


def bench_train(preset: str = "small", device: str = "auto", steps: int = 300,
                overrides: dict | None = None, data=None, latents=None, episodes: int = 64,
                compile: bool = False) -> dict:
    """Speeds of both loaders (and torch.compile if asked) for `preset` with `overrides`
    (section__field=value) on `device`; prints the table, returns the JSON."""
    cfg = make_config(preset, **(overrides or {}))
    acc = make_accelerator(cfg.train, device)
    store = bench_store(cfg, data, episodes)
    cache = bench_latents(cfg, store, latents, acc.device)
    ids = store.ids()[:episodes]
    sample = cache.get(ids[0])  # (t, c, h, w)
    geometry = (sample.shape[1], sample.shape[-1])
    f = cfg.model.chunk_frames
    clip = dict(clip_frames=f * cfg.data.clip_chunks, chunk_frames=f, stride=f, ids=ids)
    table, rows, loads = shipped_captions(), {}, {}
    t0 = time.perf_counter()
    tensors = ClipTensors(store, cache, device=acc.device, **clip)
    loads["tensors"] = time.perf_counter() - t0
    loss = world_model_loss(cfg.train, f, table, tensors.captions)
    rows["tensors"] = time_fit(cfg, geometry, tensors, loss, acc, steps)
    t0 = time.perf_counter()
    per_item = EpisodeClips(store, latents=cache, cache_episodes=len(ids), **clip)
    per_item.preload()
    loads["episodes"] = time.perf_counter() - t0
    rows["episodes"] = time_fit(cfg, geometry, per_item, world_model_loss(cfg.train, f, table),
                                acc, steps, collate_fn=collate_clips)
    if compile:
        compiled = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, compile=True))
        rows["tensors+compile"] = time_fit(compiled, geometry, tensors, loss, acc, steps)
        loads["tensors+compile"] = loads["tensors"]
    for name, row in rows.items():
        row["load_s"] = loads[name]
    print_table([{"loader": k, **{n: v for n, v in r.items() if v is not None}}
                 for k, r in rows.items()],
                f"training speed: {preset} preset, batch {cfg.train.batch_size}, "
                f"{acc.device.type}, {len(tensors)} clips of {store.root}")
    return {"preset": preset, "overrides": overrides or {}, "device": str(acc.device),
            "device_name": torch.cuda.get_device_name(acc.device)
            if acc.device.type == "cuda" else "cpu",
            "threads": torch.get_num_threads(), "steps": steps,
            "batch_size": cfg.train.batch_size, "clips": len(tensors), "episodes": len(ids),
            "sdpa_fused": fused_attention(cfg, geometry, acc.device),
            "store": str(store.root), "loaders": rows, **rows["tensors"]}
