"""Speed benchmarks of the engines and the world model (`python -m worldlab bench
engines|model`; `bench play` is in `play.script`).

Each prints a table and returns the JSON that the `bench` command writes under
`runs/bench/`. Speeds are measured, never asserted; compare them as ratios taken in one run.
"""

from __future__ import annotations

import time

import numpy as np

from ..config import make_config
from ..engines import make_engine
from ..engines.policies import WALK
from ..memory.cache3d import reprojection_error
from ..model.autoencoder import VideoAutoencoder
from ..model.dit import WorldModel
from ..pretrained import World, load_world, named_world, resolve_checkpoint, \
    resolve_device, shipped_captions
from ..train.recipes import seeded
from .protocols import runtime
from .report import print_table


# ----------------------------------------------------------------------------------------
# Engines: frames per second and reprojection error against their own depth
# ----------------------------------------------------------------------------------------

def measure_engine_fps(name: str, size: int, steps: int, seed: int = 0) -> float:
    """Frames per second of `steps` engine steps on a scripted walk (reset excluded)."""
    engine = make_engine(name, size=size)
    try:
        engine.reset(seed=seed)
        t0 = time.perf_counter()
        for k in range(steps):
            engine.step(WALK[k % len(WALK)])
        return steps / (time.perf_counter() - t0)
    finally:
        engine.close()


def engine_reprojection(name: str, size: int = 64, gap: int = 5, seed: int = 0) -> dict:
    """Median colour error (0-255) of frame j warped into frame i, dynamic pixels masked."""
    static = {"procedural": {"characters": False}, "doom": {"monsters": False}}[name]
    engine = make_engine(name, size=size, **static)
    try:
        obs = [engine.reset(seed=seed)] + [engine.step(a) for a in WALK]
    finally:
        engine.close()
    errs = []
    for i in range(len(obs) - gap):
        a, b = obs[i], obs[i + gap]
        exclude = None
        if a.instance is not None:
            exclude = a.instance != 0
        errs.append(reprojection_error(a, b, exclude=exclude))
    return {"median": float(np.median([e["median"] for e in errs])),
            "p90": float(np.median([e["p90"] for e in errs])),
            "covisible": float(np.mean([e["covisible"] for e in errs])), "gap": gap}


def bench_engines(engines=("procedural", "doom"), sizes=(64, 256), steps: int = 300) -> dict:
    """Frames/s at each size and reprojection error of each engine; prints the table."""
    result, rows = {}, []
    for name in engines:
        fps = {str(s): round(measure_engine_fps(name, s, steps), 1) for s in sizes}
        rep = engine_reprojection(name)
        result[name] = {"fps": fps, "reprojection_error": rep["median"], "reprojection": rep,
                        "steps": steps}
        rows.append({"engine": name, **{f"fps@{s}": fps[str(s)] for s in sizes},
                     "reproj_median": rep["median"], "reproj_p90": rep["p90"],
                     "covisible": rep["covisible"]})
    print_table(rows, "engines (frames/s on this machine; reprojection error in 0-255 units)")
    return result


def fresh_world(preset: str, size: int | None = None, device: str = "auto",
                overrides: dict | None = None) -> World:
    """A world of `preset` at `size` x `size` pixels with fresh, seeded weights: what its
    speed is measured on (speed does not depend on the weights)."""
    cfg = make_config(preset, **{**(overrides or {}),
                                 **({"data__size": size} if size is not None else {})})
    dev = resolve_device(device)
    ae = seeded(lambda: VideoAutoencoder.from_config_dataclass(cfg.autoencoder), 0)
    if cfg.data.size % ae.downsample:
        raise ValueError(f"size {cfg.data.size} must be a multiple of the autoencoder's "
                         f"downsampling, {ae.downsample}")
    model = seeded(lambda: WorldModel.from_config_dataclass(
        cfg.model, ae.config.latent_channels, cfg.data.size // ae.downsample), 0)
    return World(ae.to(dev).eval(), model.to(dev).eval(), cfg, dev,
                 captions=shipped_captions())


def bench_model(checkpoint=None, steps: int = 300, preset: str | None = None,
                size: int | None = None, sample_steps: int | None = None,
                device: str = "auto", overrides: dict | None = None) -> dict:
    """Streaming the world model alone (no engine, no twin): sample + decode + append per
    chunk with the KV cache, over `steps` frames; prints the table. The world is a
    checkpoint, or with `preset` a `fresh_world` at `size` pixels; `sample_steps` replaces
    its sampling steps."""
    if preset is not None and checkpoint is not None:
        raise ValueError("bench model measures a checkpoint or a fresh preset; pass one")
    world = fresh_world(preset, size, device, overrides) if preset is not None else \
        load_world(resolve_checkpoint(checkpoint), device=device)
    data = runtime(world, chunks=max(3, steps // world.chunk_frames), steps=sample_steps)
    data.update(size=world.size, sample_steps=sample_steps or world.config.sample.steps,
                parameters=sum(p.numel() for p in world.model.parameters()),
                world=f"fresh {preset}" if preset is not None else str(world.path),
                device=str(world.device))
    print_table([{k: v for k, v in data.items() if isinstance(v, (float, int))}],
                "model streaming (sample + decode + append, per chunk)")
    return data


def bench_memory(model: list[str], chunks: int = 100, sample_steps: int | None = None,
                 device: str = "auto", seed: int = 1000000) -> dict:
    """Streaming cost of worlds with memory, side by side on one held-out revisit walk
    (`memory_rollout.stream_costs`): ms per chunk, chunk 100 over chunk 2, time per chunk
    over the first world's (`ms_vs_first`; name the world without memory first), memory
    tokens per frame. `model` holds NAME=DIR specs; prints the table."""
    from tqdm.auto import tqdm

    from .memory_rollout import stream_costs
    from .protocols import heldout_episodes
    from .revisit import POLICIES

    if not model:
        raise ValueError("bench memory needs worlds to compare: --model NAME=DIR (repeatable; "
                         "the first is the baseline)")
    paths = dict(named_world(m) for m in model)
    sample = None if sample_steps is None else {"steps": sample_steps}
    worlds = {name: load_world(resolve_checkpoint(path), device=device, sample=sample)
              for name, path in paths.items()}
    first = next(iter(worlds.values()))
    opts = {"monsters": "invulnerable"} if first.config.data.engine == "doom" else {}
    walk = heldout_episodes(first.config.data.engine, 1, 96, first.size, POLICIES, seed=seed,
                            start="random", **opts)[0]
    with tqdm(total=chunks * len(worlds), desc="memory cost", unit="chunk") as bar:
        costs = stream_costs(worlds, walk, chunks=chunks, steps=sample_steps,
                             progress=bar.update)
    print_table([{"world": name,
                  **{k: v for k, v in c.items() if k not in ("chunks", "chunk_ms")}}
                 for name, c in costs.items()],
                f"memory streaming cost, side by side ({chunks} chunks, walk seed {seed})")
    return {"worlds": {name: {**c, "checkpoint": paths[name]} for name, c in costs.items()},
            "baseline": next(iter(paths)), "seed": seed, "chunks": chunks,
            "sample_steps": sample_steps, "device": str(first.device)}
