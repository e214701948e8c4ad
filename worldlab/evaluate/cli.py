"""`python -m worldlab eval --suite quick`: score a world against the engine's own frames.

Held-out episodes are recorded fresh from seeds the training data never used
(`protocols.HELDOUT_SEED`); the table is printed and every number written to
`runs/eval/<suite>.json`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..paths import RUNS
from ..pretrained import DEFAULT_WORLD, load_world, resolve_checkpoint
from .protocols import HELDOUT_SEED, heldout_episodes, quick_suite
from .report import print_quick, write_json


def _cli(args) -> int:
    from tqdm.auto import tqdm

    torch.set_num_threads(args.threads)
    world = load_world(resolve_checkpoint(args.checkpoint), device=args.device,
                       subfolder=args.weights)
    engine = args.engine or world.config.data.engine
    f = world.chunk_frames
    episodes = heldout_episodes(engine, args.episodes, f * (1 + args.horizon // f) + f,
                                world.size, seed=args.seed)
    bar = tqdm(total=3, desc="quick suite", unit="protocol")
    result = quick_suite(world, episodes, args.horizon, args.starts,
                         progress=lambda name: (bar.set_postfix_str(name), bar.update()))
    bar.close()
    result.update(checkpoint=str(args.checkpoint), weights=args.weights, engine=engine,
                  episodes={"count": len(episodes),
                            "seeds": [args.seed, args.seed + len(episodes)],
                            "frames": len(episodes[0]), "policy": "mix"},
                  threads=args.threads, device=str(world.device))
    print_quick(result)
    print(f"wrote {write_json(Path(args.out) / f'{args.suite}.json', result)}")
    return 0


def configure_cli(parser) -> None:
    parser.add_argument("--suite", default="quick", choices=["quick"])
    parser.add_argument("--checkpoint", default=str(DEFAULT_WORLD),
                        help="world directory (relative paths from the repository root)")
    parser.add_argument("--weights", default="world", help="subfolder: world | ema")
    parser.add_argument("--engine", default=None, help="default: the engine it was trained on")
    parser.add_argument("--episodes", type=int, default=8, help="held-out episodes")
    parser.add_argument("--horizon", type=int, default=32, help="open-loop rollout frames")
    parser.add_argument("--starts", type=int, default=4, help="next-chunk starts per episode")
    parser.add_argument("--seed", type=int, default=HELDOUT_SEED)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--out", default=str(RUNS / "eval"))
    parser.set_defaults(func=_cli)
