"""`table fast-decoder`: the fast decoder against the full one (data/results/fast_decoder.json).

    python -m worldlab table fast-decoder     # the shipped world + runs/fast_decoder/model

It packages the world with the trained fast decoder (`--world` + `--fast`, float16 as a
world ships it) into `--packaged`, loads that, and on held-out DOOM episodes (random
starts over MAP01-03, monsters on, player invulnerable) encodes the engine's frames with
the world's encoder and decodes them with both decoders:
- quality against the engine's frames: PSNR, SSIM (mean per frame), sharpness ratio and
  colour distance (`metrics`), and the fast decoder's PSNR against the full one's output;
- speed: ms to decode one 4-frame chunk, the median over `--chunks` chunks, the two
  decoders timed alternately on the same chunk (side by side on a shared machine), with
  `--threads` torch threads.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from ..metrics import colour_distance, psnr, sharpness_ratio, ssim
from ..model.autoencoder import frames_to_tensor, tensor_to_frames
from ..paths import ROOT, relative
from ..pretrained import CAPTIONS_FILE, load_world, package_world
from ..threads import use_threads
from .protocols import heldout_episodes
from .table_io import read_json, write_table

MAPS = ("MAP01", "MAP02", "MAP03")
WARMUP = 3  # chunks decoded before timing starts


def package(world: Path, fast: Path, out: Path) -> Path:
    """The world with `fast` as its fast decoder, as a world directory at `out`."""
    captions = world / CAPTIONS_FILE
    return package_world(world / "autoencoder", world / "world", world / "world_config.json",
                         out, captions if captions.exists() else None, fast_decoder=fast)


@torch.no_grad()
def quality(decoders: dict, latents: torch.Tensor, rgb: np.ndarray) -> dict:
    """Each decoder on latents (n, 1, c, h', w') of the engine's frames rgb (n, h, w, 3)."""
    truth = frames_to_tensor(rgb)  # (n, 3, h, w)
    out, decoded = {}, {}
    for name, dec in decoders.items():
        y = torch.cat([dec.decode(z)[:, 0] for z in latents.split(64)])  # (n, 3, h, w)
        decoded[name] = y
        seen = tensor_to_frames(y)
        out[name] = {"psnr": float(psnr(y, truth).mean()), "ssim": float(ssim(y, truth).mean()),
                     "sharpness_ratio": sharpness_ratio(seen, rgb),
                     "colour_distance": colour_distance(seen, rgb)}
    out["fast_vs_full_psnr"] = float(psnr(decoded["fast"], decoded["full"]).mean())
    return out


@torch.no_grad()
def speed(decoders: dict, chunks: list[torch.Tensor], warmup: int = WARMUP) -> dict:
    """Median ms per chunk (1, 4, c, h', w') of each decoder, timed alternately."""
    ms: dict[str, list[float]] = {name: [] for name in decoders}
    for i, z in enumerate(chunks):
        for name, dec in decoders.items():
            t0 = time.perf_counter()
            dec.decode(z)
            if i >= warmup:
                ms[name].append(1000 * (time.perf_counter() - t0))
    return {name: float(np.median(v)) for name, v in ms.items()}


def _parameters(world) -> dict:
    return {"full": sum(p.numel() for m in (world.ae.vae.post_quant_conv, world.ae.vae.decoder)
                        for p in m.parameters()),
            "fast": sum(p.numel() for p in world.fast_decoder.parameters())}


def cli(args) -> int:
    """`table fast-decoder`: measure, print the headline, write --out."""
    use_threads(args.threads)
    metrics = ROOT / Path(args.fast).parent / "metrics.json"  # train decoder's own scores
    train = read_json(metrics, (), "the metrics.json `train decoder` writes beside --fast")
    world = load_world(package(ROOT / args.world, ROOT / args.fast, ROOT / args.packaged),
                       device="cpu", decoder="full")
    decoders = {"full": world.ae, "fast": world.fast_decoder}
    eps = heldout_episodes("doom", n=args.episodes, frames=64, size=64, start="random",
                           maps=MAPS, monsters="invulnerable")
    rgb = np.concatenate([ep.rgb for ep in eps])  # (n, 64, 64, 3)
    latents = torch.cat([world.encode(ep.rgb)[0] for ep in eps])[:, None]  # (n, 1, c, 8, 8)
    f = world.chunk_frames
    chunks = [latents[i:i + f, 0][None] for i in range(0, len(latents) - f + 1, f)]
    scores = quality(decoders, latents, rgb)
    ms = speed(decoders, chunks[:args.chunks + WARMUP])
    for name in decoders:
        scores[name]["decode_ms_per_chunk"] = round(ms[name], 2)
    result = {
        "what": "the world's small distilled decoder (sample.decoder = fast) against its full "
                "decoder, on the world's encoder latents of held-out engine frames",
        "world": relative(args.world), "fast_decoder": relative(args.fast),
        "episodes": {"engine": "doom", "n": args.episodes, "frames": 64, "size": 64,
                     "start": "random", "maps": list(MAPS),
                     "monsters": "invulnerable", "total_frames": len(rgb)},
        "timing": {"torch_threads": args.threads, "chunk_frames": f,
                   "chunks": len(chunks[WARMUP:args.chunks + WARMUP])},
        **scores,
        "speedup": round(ms["full"] / ms["fast"], 2),
        "psnr_cost_db": round(scores["full"]["psnr"] - scores["fast"]["psnr"], 2),
        "parameters": _parameters(world),
        "training": {"command": args.train_command, **train},
    }
    write_table(args.out, result)
    print(json.dumps({k: result[k] for k in ("full", "fast", "speedup", "psnr_cost_db")},
                     indent=1))
    return 0
