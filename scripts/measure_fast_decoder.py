"""The fast decoder against the full one: data/results/fast_decoder.json.

    .venv/bin/python scripts/measure_fast_decoder.py        # the shipped world + runs/fast_decoder

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

import argparse
import json
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import torch

from worldlab.atomic import atomic_write_json
from worldlab.evaluate.protocols import heldout_episodes
from worldlab.metrics import colour_distance, psnr, sharpness_ratio, ssim
from worldlab.model.autoencoder import frames_to_tensor, tensor_to_frames
from worldlab.pretrained import CAPTIONS_FILE, load_world, package_world

ROOT = Path(__file__).resolve().parents[1]
TRAIN_COMMAND = ("OMP_NUM_THREADS=1 python -m worldlab train decoder --world "
                 "data/checkpoints/doom64_teacher --data runs/w2/data900 "
                 "--latents runs/w2/data/latents "
                 "--out runs/fast_decoder --minutes 11 --device cpu")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True,
                          cwd=ROOT).stdout.strip()


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
def speed(decoders: dict, chunks: list[torch.Tensor], warmup: int = 3) -> dict:
    """Median ms per chunk (1, 4, c, h', w') of each decoder, timed alternately."""
    ms: dict[str, list[float]] = {name: [] for name in decoders}
    for i, z in enumerate(chunks):
        for name, dec in decoders.items():
            t0 = time.perf_counter()
            dec.decode(z)
            if i >= warmup:
                ms[name].append(1000 * (time.perf_counter() - t0))
    return {name: float(np.median(v)) for name, v in ms.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", default="data/checkpoints/doom64_teacher")
    ap.add_argument("--fast", default="runs/fast_decoder/model", help="train decoder's model")
    ap.add_argument("--packaged", default="runs/fast_decoder/world",
                    help="where the world with its fast decoder is written")
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--chunks", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="data/results/fast_decoder.json")
    ap.add_argument("--train-command", default=TRAIN_COMMAND,
                    help="the command that trained --fast, recorded in the JSON")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    world = load_world(package(ROOT / args.world, ROOT / args.fast, ROOT / args.packaged),
                       device="cpu", decoder="full")
    decoders = {"full": world.ae, "fast": world.fast_decoder}
    eps = heldout_episodes("doom", n=args.episodes, frames=64, size=64, start="random",
                           maps=("MAP01", "MAP02", "MAP03"), monsters="invulnerable")
    rgb = np.concatenate([ep.rgb for ep in eps])  # (n, 64, 64, 3)
    latents = torch.cat([world.encode(ep.rgb)[0] for ep in eps])[:, None]  # (n, 1, c, 8, 8)
    f = world.chunk_frames
    chunks = [latents[i:i + f, 0][None] for i in range(0, len(latents) - f + 1, f)]
    scores = quality(decoders, latents, rgb)
    ms = speed(decoders, chunks[:args.chunks + 3])
    for name in decoders:
        scores[name]["decode_ms_per_chunk"] = round(ms[name], 2)
    train = json.loads((ROOT / args.fast).parent.joinpath("metrics.json").read_text())
    result = {
        "what": "the world's small distilled decoder (sample.decoder = fast) against its full "
                "decoder, on the world's encoder latents of held-out engine frames",
        "command": "python " + " ".join(["scripts/measure_fast_decoder.py",
                                         *(sys.argv[1:] if argv is None else argv)]),
        "commit": _git("rev-parse", "HEAD"),
        "uncommitted_changes": bool(_git("status", "--porcelain")),
        "measured": str(date.today()), "world": args.world, "fast_decoder": args.fast,
        "episodes": {"engine": "doom", "n": args.episodes, "frames": 64, "size": 64,
                     "start": "random", "maps": ["MAP01", "MAP02", "MAP03"],
                     "monsters": "invulnerable", "total_frames": len(rgb)},
        "timing": {"torch_threads": args.threads, "chunk_frames": f,
                   "chunks": len(chunks[3:args.chunks + 3])},
        **scores,
        "speedup": round(ms["full"] / ms["fast"], 2),
        "psnr_cost_db": round(scores["full"]["psnr"] - scores["fast"]["psnr"], 2),
        "parameters": {"full": sum(p.numel() for m in (world.ae.vae.post_quant_conv,
                                                       world.ae.vae.decoder)
                                   for p in m.parameters()),
                       "fast": sum(p.numel() for p in world.fast_decoder.parameters())},
        "training": {"command": args.train_command, **train},
    }
    atomic_write_json(ROOT / args.out, result)
    print(json.dumps({k: result[k] for k in ("full", "fast", "speedup", "psnr_cost_db")},
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
