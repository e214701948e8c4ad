"""`python -m worldlab eval --suite full | quick | long | revisit | autoencoder`: score a
world against the engine's own frames (`--start random --maps MAP01,MAP04`: held-out starts
over whole maps). `full` runs every protocol for the world, its peer and repeat-last
(`full.py`) and writes `full.json` and `full.html`.

    python -m worldlab eval --suite long --model teacher_forcing=runs/long/baseline \
        --model bank=runs/long/bank   # several worlds on the same walks: `methods`
    python -m worldlab eval --suite revisit --model none=data/checkpoints/doom64_teacher \
        --model sink=runs/memory/sink   # the revisit walks, with each world's memory

Held-out episodes are recorded fresh from seeds the training data never used
(`protocols.HELDOUT_SEED`); the table is printed and every number written to
`runs/eval/<suite>.json`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..atomic import atomic_write_json
from ..config import STARTS
from ..paths import RUNS
from ..loading import load_module
from ..model.autoencoder import VideoAutoencoder
from ..pretrained import DEFAULT_WORLD, load_world, named_world, resolve_checkpoint
from .long import combine_seeds, long_horizon
from .protocols import HELDOUT_SEED, autoencoder_scores, heldout_episodes, quick_suite
from .report import print_long, print_quick, print_revisit, print_table
from .revisit import MIN_GAP, MIN_OVERLAP, POLICIES, revisit


SUITE_DEFAULTS = {  # episodes, frames, start: a minute of play from anywhere for "long"
    "quick": (8, None, "player"), "autoencoder": (8, 64, "player"),
    "long": (2, 1000, "random"), "revisit": (8, 96, "random"),
    "full": (None, None, None)}  # full: its sizes are `full.SuiteSizes` (--full-size)
INVULNERABLE = ("long", "revisit")  # suites whose DOOM walks must not end in death
MODEL_SUITES = ("long", "revisit", "full")  # suites that take --model NAME=DIR worlds


def _policy(args) -> str | tuple[str, ...]:
    return POLICIES if args.suite == "revisit" else "mix"


def _episodes(args, engine: str, frames: int, size: int) -> list:
    maps = tuple(m for m in args.maps.replace("+", ",").split(",") if m) if args.maps else None
    opts = {"monsters": "invulnerable"} if args.suite in INVULNERABLE and engine == "doom" \
        else {}
    return heldout_episodes(engine, args.episodes, frames, size, _policy(args),
                            seed=args.seed, start=args.start, maps=maps, **opts)


def _models(args) -> dict[str, str]:
    """{name: world directory} of every --model NAME=DIR, else the --checkpoint."""
    return dict(_named(m) for m in args.model) if args.model else \
        {Path(args.checkpoint).name: args.checkpoint}


def _revisit(args) -> tuple[dict, list, str]:
    """The revisit protocol for each --model NAME=DIR (or the --checkpoint) on the same
    walks: (its result, the walks, their engine)."""
    from tqdm.auto import tqdm

    worlds = {name: load_world(resolve_checkpoint(path), device=args.device,
                               subfolder=args.weights, sample=_sample(args))
              for name, path in _models(args).items()}
    first = next(iter(worlds.values()))
    engine = args.engine or first.config.data.engine
    episodes = _episodes(args, engine, args.frames, first.size)
    f = max(w.chunk_frames for w in worlds.values())
    chunks = len(worlds) * (len(episodes) * (args.frames // f - 1) + args.cost_chunks)
    with tqdm(total=chunks, desc="revisit", unit="chunk") as bar:
        result = revisit(worlds, episodes, steps=args.steps, cost_chunks=args.cost_chunks,
                         progress=bar.update, min_gap=args.min_gap,
                         min_overlap=args.min_overlap)
    for name, path in _models(args).items():
        result["variants"][name]["checkpoint"] = str(path)
    print_revisit(result)
    return result, episodes, engine


def _long(args) -> tuple[dict, list, str]:
    """The long-horizon protocol for each --model NAME=DIR (or the --checkpoint), on the
    same walks: ({"methods": {name: scores}}, the walks, their engine)."""
    from tqdm.auto import tqdm

    models = _models(args)
    episodes, engine, result = None, None, {"methods": {}}
    for name, path in models.items():
        world = load_world(resolve_checkpoint(path), device=args.device,
                           subfolder=args.weights, sample=_sample(args))
        if episodes is None:
            engine = args.engine or world.config.data.engine
            episodes = _episodes(args, engine, args.frames, world.size)
        chunks = len(episodes) * (args.frames // world.chunk_frames - 1)
        with tqdm(total=chunks, desc=f"long: {name}", unit="chunk") as bar:
            scores = long_horizon(world, episodes, progress=bar.update)
        tc = world.config.train
        result["methods"][name] = {
            "checkpoint": str(path), "sampling_steps": world.config.sample.steps,
            "sample_context_noise": world.config.sample.context_noise,
            "training": {k: getattr(tc, k) for k in ANTI_DRIFT_FIELDS}, **scores}
    result["seeds"] = combine_seeds(result["methods"])
    print_long(result["methods"], result["seeds"])
    return result, episodes, engine


ANTI_DRIFT_FIELDS = ("steps", "batch_size", "lr", "seed", "forcing", "context_corruption",
                     "corruption_prob", "context_noise", "self_rollout_prob",
                     "self_rollout_steps")


def _sample(args) -> dict | None:
    return None if args.steps is None else {"steps": args.steps}


def _named(spec: str) -> tuple[str, str]:
    try:
        return named_world(spec)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def _quick(args, world) -> tuple[dict, list]:
    from tqdm.auto import tqdm

    f = world.chunk_frames
    episodes = _episodes(args, args.engine or world.config.data.engine,
                         f * (1 + args.horizon // f) + f, world.size)
    bar = tqdm(total=3, desc="quick suite", unit="protocol")
    result = quick_suite(world, episodes, args.horizon, args.starts, args.runtime_chunks,
                         progress=lambda name: (bar.set_postfix_str(name), bar.update()))
    bar.close()
    result["sampling_steps"] = world.config.sample.steps
    print_quick(result)
    return result, episodes


def _autoencoder(args, ae, engine: str, size: int) -> tuple[dict, list]:
    episodes = _episodes(args, engine, args.frames, size)
    result = autoencoder_scores(ae, episodes)
    print_table([result],
                "autoencoder reconstruction of held-out engine frames")
    return result, episodes


def _full(args) -> int:
    """Every protocol for each --model NAME=DIR (or the --checkpoint), with its engine's
    probes and peer; one JSON and one HTML page for all of them."""
    from tqdm.auto import tqdm

    from .full import full_suite, suite_sizes
    from .full_report import print_full, save_strip, write_html
    from .shipped import load_shipped_peer, load_shipped_probes

    sizes = suite_sizes(args.full_size)
    results, strips = {}, {}
    for name, path in _models(args).items():
        world = load_world(resolve_checkpoint(path), device=args.device,
                           subfolder=args.weights, sample=_sample(args))
        engine = args.engine or world.config.data.engine
        probes = load_shipped_probes(engine, args.probes)
        peer = None if args.peer == "none" else load_shipped_peer(world, args.peer)
        bar = tqdm(total=6, desc=f"full suite: {name}", unit="section")
        results[name], strips[name] = full_suite(
            world, peer, probes, sizes, engine=engine,
            progress=lambda section: (bar.set_postfix_str(section), bar.update()))
        bar.close()
        results[name].update(checkpoint=str(path), peer=None if peer is None else
                             str(peer.path), threads=args.threads, device=args.device)
        print(f"\n{name}: {engine}, {results[name]['seconds']['total']:.0f} s")
        print_full(results[name])
    out = Path(args.out)
    print(f"wrote {atomic_write_json(out / 'full.json', {'worlds': results})}")
    print(f"wrote {write_html(results, strips, out / 'full.html')}")
    for name, s in strips.items():
        for where, frames in s.items():
            print(f"wrote {save_strip(frames, out / f'full_strip_{name}_{where}.png')}")
    return 0


def _cli(args) -> int:
    torch.set_num_threads(args.threads)
    if args.suite == "full":
        return _full(args)
    episodes_default, frames_default, start_default = SUITE_DEFAULTS[args.suite]
    args.episodes = args.episodes or episodes_default
    args.frames = args.frames or frames_default
    args.start = args.start or start_default
    if args.model and args.suite not in MODEL_SUITES:
        raise SystemExit(f"--model NAME=DIR compares worlds in the {' and '.join(MODEL_SUITES)} "
                         f"suites; use --checkpoint for the others")
    if args.autoencoder is not None:  # an autoencoder alone, not a world's
        if args.suite != "autoencoder":
            raise SystemExit("--autoencoder scores an autoencoder alone: use it with "
                             "--suite autoencoder")
        ae = load_module(VideoAutoencoder, args.autoencoder).float().eval()
        engine, source = args.engine or "doom", args.autoencoder
        result, episodes = _autoencoder(args, ae, engine, args.size)
    elif args.suite in MODEL_SUITES:
        result, episodes, engine = (_long if args.suite == "long" else _revisit)(args)
        source = ",".join(args.model) or args.checkpoint
    else:
        world = load_world(resolve_checkpoint(args.checkpoint), device=args.device,
                           subfolder=args.weights, sample=_sample(args))
        engine, source = args.engine or world.config.data.engine, args.checkpoint
        result, episodes = _quick(args, world) if args.suite == "quick" else \
            _autoencoder(args, world.ae, engine, world.size)
    settings = {"count": len(episodes), "seeds": [args.seed, args.seed + len(episodes)],
                "frames": len(episodes[0]), "policy": _policy(args),
                "monsters": "invulnerable" if args.suite in INVULNERABLE else "on",
                "start": args.start, "maps": args.maps}
    if args.suite == "revisit":  # the episodes scored: those with a return frame
        settings = {**settings, **result["episodes"], "recorded": len(episodes)}
    result.update(checkpoint=str(source), weights=args.weights, engine=engine,
                  episodes=settings, threads=args.threads, device=args.device)
    print(f"wrote {atomic_write_json(Path(args.out) / f'{args.suite}.json', result)}")
    return 0


def configure_cli(parser) -> None:
    parser.add_argument("--suite", default="quick", choices=list(SUITE_DEFAULTS),
                        help="full: every protocol below plus events, camera following and "
                             "an unseen map, for the world, the peer and repeat-last, with "
                             "intervals and an HTML report; "
                             "quick: next chunk, drift, controls, runtime; long: a minute "
                             "of open loop against drift-free, autoencoder and repeat-last "
                             "references; revisit: coming back to views seen before, with "
                             "each world's memory; autoencoder: reconstruction PSNR, SSIM, "
                             "sharpness and colour")
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR",
                        help="long and revisit suites: a world to score, repeatable (same "
                             "walks); NAME_seedK are seeds of NAME")
    parser.add_argument("--checkpoint", default=str(DEFAULT_WORLD),
                        help="world directory (relative paths from the repository root)")
    parser.add_argument("--weights", default="world", help="subfolder: world | ema")
    parser.add_argument("--autoencoder", default=None, metavar="DIR",
                        help="autoencoder suite: score this autoencoder directory (e.g. "
                             "runs/ae/model) instead of a world's")
    parser.add_argument("--size", type=int, default=64,
                        help="frame side of the held-out episodes with --autoencoder")
    parser.add_argument("--engine", default=None, help="default: the engine it was trained on")
    parser.add_argument("--episodes", type=int, default=None,
                        help="held-out episodes (default 8; 2 walks for long)")
    parser.add_argument("--start", default=None, choices=STARTS,
                        help="player: the level's start; random: over the reachable level "
                             "(default player; random for long and revisit)")
    parser.add_argument("--maps", default=None,
                        help="doom maps, comma-separated; episode k plays map k mod count")
    parser.add_argument("--frames", type=int, default=None,
                        help="frames per held-out episode: autoencoder (64), long (1000) "
                             "and revisit (96) suites")
    parser.add_argument("--horizon", type=int, default=32, help="open-loop rollout frames")
    parser.add_argument("--starts", type=int, default=4, help="next-chunk starts per episode")
    parser.add_argument("--runtime-chunks", type=int, default=50,
                        help="chunks streamed to time the runtime (at least 6)")
    parser.add_argument("--min-gap", type=int, default=MIN_GAP,
                        help="revisit: frames between an outbound view and its return")
    parser.add_argument("--min-overlap", type=float, default=MIN_OVERLAP,
                        help="revisit: share of a return view an outbound view must cover")
    parser.add_argument("--cost-chunks", type=int, default=100,
                        help="revisit: chunks streamed with memory to time it (0: skip; "
                             "else at least 12)")
    parser.add_argument("--steps", type=int, default=None,
                        help="sampling steps (default: each world's own sample.steps)")
    parser.add_argument("--peer", default=None, metavar="DIR",
                        help="full suite: the peer baseline (default: the world's shipped "
                             "data/checkpoints/peer_<world>, if any; 'none' to leave it out)")
    parser.add_argument("--probes", default=None, metavar="DIR",
                        help="full suite: events and camera probes (default: the shipped "
                             "ones of the world's engine)")
    parser.add_argument("--full-size", action="append", default=[], metavar="KEY=N",
                        help="full suite: change one of its sizes (full.SuiteSizes), e.g. "
                             "episodes=2; repeatable")
    parser.add_argument("--seed", type=int, default=HELDOUT_SEED)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--out", default=str(RUNS / "eval"))
    parser.set_defaults(func=_cli)
