"""What each inference switch buys and costs: `python -m worldlab bench inference
[--checkpoint DIR] [--chunks N] [--episodes N]`.

Every setting of the switches this device can run (`model.inference`: on the CPU none,
int8, compile, int8+compile; on a GPU none, bf16, compile, bf16+compile) is loaded as its
own copy of the world and measured side by side in one run:

- speed: the settings stream in turn, chunk by chunk (so a busy machine slows them alike),
  each with its own KV cache, the same seeded noise and a still camera; transformer and
  decode ms per chunk are medians over `chunks` chunks after `window_chunks` + 2 warm-up
  chunks (the cache fills, and a compiled trunk compiles once per cache shape; `warmup_s`
  is their total, compile included); `speedup` is "none"'s transformer + decode time over
  the setting's; `cpu_ms` is the process's CPU time per chunk (transformer + decode), which
  other jobs on a shared machine barely change (with one thread: an idle core's wall time);
- quality: teacher-forced next-chunk PSNR against the engine on `episodes` held-out
  episodes (`protocols.next_chunk`, the same noise for every setting), as a loss in dB
  against "none"; and the largest absolute difference of the streamed latents from
  "none"'s for the same noise: the first chunk alone, and over every chunk (errors feed
  the cache and compound).

`python -m worldlab bench inference --out data/results` writes the shipped world's table,
data/results/inference.json, with the command, the commit and the machine's load.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from ..pretrained import load_world, resolve_checkpoint, resolve_device
from .protocols import (chunk_noise, heldout_episodes, make_chunk, next_chunk, speed_stream,
                        still_conditions)
from .report import print_table, provenance

OFF = {"quantize": "none", "compile": False, "autocast": "no"}
SETTINGS = {  # device type -> setting -> its sample overrides
    "cpu": {"none": {}, "int8": {"quantize": "int8"}, "compile": {"compile": True},
            "int8+compile": {"quantize": "int8", "compile": True}},
    "cuda": {"none": {}, "bf16": {"autocast": "bf16"}, "compile": {"compile": True},
             "bf16+compile": {"autocast": "bf16", "compile": True}},
}


def stream_side_by_side(worlds: dict, chunks: int) -> dict:
    """Stream every world in turn, chunk by chunk; per name: warmup_s, transformer_ms,
    decode_ms, cpu_ms (medians after the warm-up) and the latents (1, t, c, h, w) of every
    chunk."""
    first = next(iter(worlds.values()))
    warmup = first.model.config.window_chunks + 2
    runs = {name: {"stream": speed_stream(w), "cond": still_conditions(w), "times": [],
                   "g": torch.Generator().manual_seed(0), "latents": []}
            for name, w in worlds.items()}
    for _ in range(warmup + chunks):
        for name, world in worlds.items():
            r, cpu = runs[name], time.process_time()
            x, transformer, decode = make_chunk(world, r["stream"], chunk_noise(world, r["g"]),
                                                r["cond"])
            r["times"].append((transformer, decode, time.process_time() - cpu))
            r["latents"].append(x.float().cpu())
    out = {}
    for name, r in runs.items():
        times = np.array(r["times"]) * 1e3  # (chunks, 3) ms
        out[name] = {"warmup_s": float(times[:warmup, :2].sum()) / 1e3,  # wall time
                     "transformer_ms": float(np.median(times[warmup:, 0])),
                     "decode_ms": float(np.median(times[warmup:, 1])),
                     "cpu_ms": float(np.median(times[warmup:, 2])),
                     "latents": torch.cat(r["latents"], dim=1)}
    return out


def _row(name: str, speed: dict, psnr: float, base: dict, base_psnr: float, f: int) -> dict:
    chunk_ms = speed["transformer_ms"] + speed["decode_ms"]
    diff = (speed["latents"] - base["latents"]).abs()  # (1, t, c, h, w)
    return {"setting": name, "transformer_ms": speed["transformer_ms"],
            "decode_ms": speed["decode_ms"], "chunk_ms": chunk_ms,
            "speedup": (base["transformer_ms"] + base["decode_ms"]) / chunk_ms,
            "cpu_ms": speed["cpu_ms"], "speedup_cpu": base["cpu_ms"] / speed["cpu_ms"],
            "warmup_s": speed["warmup_s"], "next_chunk_psnr": psnr,
            "psnr_loss_db": base_psnr - psnr,
            "latent_max_abs_diff": float(diff[:, :f].max()),
            "latent_max_abs_diff_rollout": float(diff.max())}


def bench_inference(checkpoint=None, chunks: int = 6, episodes: int = 4,
                    device: str = "auto") -> dict:
    """Speed and quality loss of every switch setting of this device (module docstring);
    prints the table and returns the rows with the command and commit."""
    for name, n in (("chunks", chunks), ("episodes", episodes)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name} must be an int >= 1, got {n!r}")
    dev, load_start = resolve_device(device), os.getloadavg()[0]  # other jobs' load
    path = resolve_checkpoint(checkpoint)
    worlds = {name: load_world(path, device=str(dev), sample={**OFF, **overrides})
              for name, overrides in SETTINGS[dev.type].items()}
    base = worlds["none"]
    speed = stream_side_by_side(worlds, chunks)
    # room for the trained context (the KV window) and two scored chunks per episode
    frames = (base.config.model.window_chunks + 2) * base.chunk_frames
    eps = heldout_episodes(base.config.data.engine, episodes, frames, base.size)
    scores = {name: next_chunk(w, eps, starts_per_episode=2) for name, w in worlds.items()}
    psnr = {name: s["next_chunk_psnr"] for name, s in scores.items()}
    rows = [_row(name, speed[name], psnr[name], speed["none"], psnr["none"],
                 base.chunk_frames) for name in worlds]
    print_table(rows, f"inference switches ({dev}, {torch.get_num_threads()} threads; ms per "
                      f"chunk, PSNR loss in dB against 'none')")
    command = " ".join(["python -m worldlab bench inference",
                        *([f"--checkpoint {checkpoint}"] if checkpoint is not None else []),
                        f"--chunks {chunks} --episodes {episodes} --device {device}",
                        f"--threads {torch.get_num_threads()}"])
    return {"what": "speed and quality loss of each inference switch of a world, measured "
                    "side by side in one run (worldlab.evaluate.switches)",
            **provenance(command), "checkpoint": str(path),
            "device": str(dev), "threads": torch.get_num_threads(),
            "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},
            "sample_steps": base.config.sample.steps, "chunks": chunks,
            "next_chunk_samples": scores["none"]["next_chunk_samples"],
            "rows": {r["setting"]: r for r in rows}}
