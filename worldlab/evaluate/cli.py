"""`python -m worldlab eval --suite quick | autoencoder | long | revisit | full | PROTOCOL`:
score a world against the engine's own frames (`--start random --maps MAP01,MAP04`:
held-out starts over whole maps). `full` runs every protocol of `registry.PROTOCOLS` for
the world, its peer and repeat-last (`full.py`) and writes `full.json` and `full.html`;
`--suite PROTOCOL` runs that one protocol of it the same way (`PROTOCOL.json`, `.html`).
`long` and `revisit` are also protocols of the full suite; as suites of their own they
compare several worlds (`--model`) on the same walks at their own sizes (`SUITES`), as does
`recall` (the recall protocol of `table recall`, each world paired with the first).

    python -m worldlab eval --suite long --model teacher_forcing=runs/long/baseline \
        --model bank=runs/long/bank   # several worlds on the same walks: `methods`
    python -m worldlab eval --suite revisit --model none=data/checkpoints/doom64_teacher \
        --model sink=runs/memory/sink   # the revisit walks, with each world's memory
    python -m worldlab eval --suite recall --model none=runs/recall/worlds/none \
        --model retrieval=runs/recall/worlds/retrieval   # procedural walls differ per segment

Held-out episodes are recorded fresh from seeds the training data never used
(`protocols.HELDOUT_SEED`); the table is printed and every number written to
`runs/eval/<suite>.json`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..atomic import atomic_write_json
from ..config import STARTS
from ..engines import policies as players
from ..paths import RUNS
from ..loading import load_module
from ..model.autoencoder import VideoAutoencoder
from ..pretrained import DEFAULT_WORLD, load_world, named_world, resolve_checkpoint
from ..threads import use_threads
from . import registry
from .long import long_horizon, pool_methods
from .protocols import (HELDOUT_SEED, QUICK_STEPS, autoencoder_scores, heldout_episodes,
                        quick_suite)
from .report import print_long, print_quick, print_revisit, print_table
from .revisit import MIN_GAP, MIN_OVERLAP, POLICIES, revisit
from .suite.walks import walks_summary, whole


def _episodes(args, engine: str, frames: int, size: int) -> list:
    suite = SUITES[args.suite]
    maps = tuple(m for m in args.maps.replace("+", ",").split(",") if m) if args.maps else None
    return heldout_episodes(engine, args.episodes, frames, size, args.policy or suite.policy,
                            seed=args.seed, start=args.start, maps=maps,
                            **_engine_options(args, engine, suite.invulnerable))


def _engine_options(args, engine: str, invulnerable: bool) -> dict:
    """The held-out walks' engine options: DOOM's monsters (invulnerable when a walk must not
    end in death), procedural --walls, DOOM's coarse depth with --no-metric-depth."""
    opts = {"monsters": "invulnerable"} if invulnerable and engine == "doom" else {}
    if args.walls:
        if engine != "procedural":
            raise SystemExit(f"--walls is a procedural option; the engine is {engine!r}")
        opts["walls"] = args.walls
    if args.no_metric_depth:  # the coarse depth buffer: warp-last is coarser too
        if engine != "doom":
            raise SystemExit(f"--no-metric-depth is a doom option; the engine is {engine!r}")
        opts["metric_depth"] = False
    return opts


def _models(args) -> dict[str, str]:
    """{name: world directory} of every --model NAME=DIR, else the --checkpoint."""
    return dict(_named(m) for m in args.model) if args.model else \
        {Path(args.checkpoint).name: args.checkpoint}


def _source(args) -> str:
    return ",".join(args.model) or args.checkpoint


def _revisit(args) -> tuple[dict, list, str, str]:
    """The revisit protocol for each --model NAME=DIR (or the --checkpoint) on the same
    walks: (its result, the walks, their engine, the worlds)."""
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
    return result, episodes, engine, _source(args)


def _recall(args) -> tuple[dict, list, str, str]:
    """The recall protocol (`recall.py`) for each --model NAME=DIR (or the --checkpoint) on
    the same walks with recall frames: the way out teacher forced, the return generated,
    scored where only memory knows the answer; each world paired walk by walk with the
    first --model, beside the oracle, copy, repeat-last, warp-last and the autoencoder."""
    from tqdm.auto import tqdm

    from .recall import recall_walks, reference_recall, world_recall
    from .recall_table import block, describe, print_block, walk_geometry

    models = _models(args)
    worlds = {name: load_world(resolve_checkpoint(path), device=args.device,
                               subfolder=args.weights, sample=_sample(args))
              for name, path in models.items()}
    f, window = walk_geometry(worlds)
    reference, first = next(iter(worlds.items()))
    engine = args.engine or first.config.data.engine
    maps = tuple(m for m in (args.maps or "MAP04").split(",") if m) if engine == "doom" else ()
    opts = _engine_options(args, engine, invulnerable=True)
    if engine == "procedural":
        opts.setdefault("walls", "segment")  # walls that differ within a room: the testbed
    walks, pairs, info = recall_walks(args.episodes, args.frames, window, f, engine, maps,
                                      args.seed, **opts)
    scores = {name: world_recall(w, walks, pairs, steps=args.steps)
              for name, w in tqdm(worlds.items(), desc="recall", unit="world")}
    b = block(scores, reference_recall(first, walks, pairs), reference,
              describe(walks, pairs, info, engine, maps, opts, args.seed, window))
    print_block(b, reference)
    # as `table recall` writes it (one block), with the seeds tried: those without recall
    # frames are named in walks.without_recall_frames
    return ({"reference": reference, "models": {n: str(p) for n, p in models.items()},
             "engines": {engine: b},
             "walks": {"recorded": info["seeds_tried"], "scored": len(walks),
                       "frames": args.frames, "without_recall_frames": info["left_out"]}},
            walks, engine, _source(args))


def _long(args) -> tuple[dict, list, str, str]:
    """The long-horizon protocol for each --model NAME=DIR (or the --checkpoint), on the
    same walks: ({"methods": {name: scores}}, the walks, their engine, the worlds)."""
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
            scores = long_horizon(world, episodes, progress=bar.update, engine=engine)
        tc = world.config.train
        result["methods"][name] = {
            "checkpoint": str(path), "sampling_steps": world.config.sample.steps,
            "sample_context_noise": world.config.sample.context_noise,
            "training": {k: getattr(tc, k) for k in ANTI_DRIFT_FIELDS}, **scores}
    result["seeds"] = pool_methods(result["methods"])
    print_long(result["methods"], result["seeds"])
    return result, episodes, engine, _source(args)


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


def _world(args):
    """The --checkpoint world and its engine (--engine, else the one it was trained on)."""
    world = load_world(resolve_checkpoint(args.checkpoint), device=args.device,
                       subfolder=args.weights, sample=_sample(args))
    return world, args.engine or world.config.data.engine


def _quick(args) -> tuple[dict, list, str, str]:
    from tqdm.auto import tqdm

    world, engine = _world(args)
    f = world.chunk_frames
    frames = f * (1 + args.horizon // f) + f
    recorded = _episodes(args, engine, frames, world.size)
    episodes = whole(recorded, frames, "held-out")  # a walk whose player died is left out
    if len(episodes) < len(recorded):
        print(f"left out {len(recorded) - len(episodes)} of {len(recorded)} walks that ended "
              f"before {frames} frames (the player died or left the map); scored "
              f"{len(episodes)}")
    bar = tqdm(total=len(QUICK_STEPS), desc="quick suite", unit="protocol")
    result = quick_suite(world, episodes, args.horizon, args.starts, args.runtime_chunks,
                         progress=lambda name: (bar.set_postfix_str(name), bar.update()),
                         engine=engine)
    bar.close()
    result["sampling_steps"] = world.config.sample.steps
    result["walks"] = walks_summary(recorded, episodes, frames)
    print_quick(result)
    return result, episodes, engine, args.checkpoint


def _autoencoder(args) -> tuple[dict, list, str, str]:
    """The --autoencoder alone (frames of --size px, DOOM unless --engine), else the
    --checkpoint world's autoencoder."""
    if args.autoencoder is not None:
        ae = load_module(VideoAutoencoder, args.autoencoder).float().eval()
        engine, source, size = args.engine or "doom", args.autoencoder, args.size
    else:
        world, engine = _world(args)
        ae, source, size = world.ae, args.checkpoint, world.size
    episodes = _episodes(args, engine, args.frames, size)
    result = autoencoder_scores(ae, episodes)
    print_table([result], "autoencoder reconstruction of held-out engine frames")
    return result, episodes, engine, source


@dataclass(frozen=True)
class Suite:
    """A suite of its own: `run(args) -> (result, episodes, engine, source)` and the
    defaults of its held-out walks."""

    run: Callable
    episodes: int = 8
    frames: int | None = None
    start: str = "player"
    policy: str | tuple[str, ...] = "mix"
    invulnerable: bool = False  # DOOM walks must not end in death
    models: bool = False  # takes --model NAME=DIR worlds
    scored_subset: bool = False  # result["episodes"]: the walks scored, of those recorded


SUITES = {"quick": Suite(_quick), "autoencoder": Suite(_autoencoder, frames=64),
          "long": Suite(_long, 2, 1000, "random", invulnerable=True, models=True),
          "revisit": Suite(_revisit, 8, 96, "random", POLICIES, invulnerable=True,
                           models=True, scored_subset=True),
          "recall": Suite(_recall, 32, 96, "random", POLICIES, invulnerable=True,
                          models=True)}  # a minute of play for long


def suite_choices() -> list[str]:
    """Every --suite: the suites of their own, `full`, and each protocol of the full suite
    that is not one of them (read from the registry when the parser is built)."""
    return [*SUITES, "full", *(n for n in registry.names() if n not in SUITES)]


def _full(args) -> int:
    """The full suite's protocols (`--suite full`: all; else the one named) for each
    --model NAME=DIR (or the --checkpoint), with its engine's probes and peer; one JSON
    and one HTML page for all of them."""
    from tqdm.auto import tqdm

    from .budget import parse_stated
    from .full import full_suite, suite_sizes
    from .full_report import print_full, save_strip, write_html
    from .shipped import load_shipped_peer, load_shipped_probes

    chosen = registry.select(None if args.suite == "full" else [args.suite])
    sizes = suite_sizes(args.full_size)
    models = _models(args)
    stated = parse_stated(args.budget, models)
    results, strips = {}, {}
    for name, path in models.items():
        world = load_world(resolve_checkpoint(path), device=args.device,
                           subfolder=args.weights, sample=_sample(args))
        engine = args.engine or world.config.data.engine
        probes = load_shipped_probes(engine, args.probes)
        peer = None if args.peer == "none" else load_shipped_peer(world, args.peer)
        bar = tqdm(total=len(chosen), desc=f"{args.suite} suite: {name}", unit="protocol")
        results[name], strips[name] = full_suite(
            world, peer, probes, sizes, engine=engine, protocols=[p.name for p in chosen],
            progress=lambda title: (bar.set_postfix_str(title), bar.update()),
            budget=stated.get(name))
        bar.close()
        results[name].update(checkpoint=str(path), peer=None if peer is None else
                             str(peer.path), threads=args.threads, device=args.device)
        print(f"\n{name}: {engine}, {results[name]['seconds']['total']:.0f} s")
        print_full(results[name])
    out, stem = Path(args.out), args.suite
    print(f"wrote {atomic_write_json(out / f'{stem}.json', {'worlds': results})}")
    print(f"wrote {write_html(results, strips, out / f'{stem}.html')}")
    for name, s in strips.items():
        for where, frames in s.items():
            print(f"wrote {save_strip(frames, out / f'{stem}_strip_{name}_{where}.png')}")
    return 0


def _cli(args) -> int:
    use_threads(args.threads)
    if args.autoencoder is not None and args.suite != "autoencoder":
        raise SystemExit("--autoencoder scores an autoencoder alone: use it with "
                         "--suite autoencoder")
    if args.suite not in SUITES:  # full, or one protocol of it
        return _full(args)
    suite = SUITES[args.suite]
    args.episodes = args.episodes or suite.episodes
    args.frames = args.frames or suite.frames
    args.start = args.start or suite.start
    if args.model and not suite.models:
        takes = [n for n, s in SUITES.items() if s.models] + ["full and its protocols"]
        raise SystemExit(f"--model NAME=DIR compares worlds in the {', '.join(takes)} "
                         f"suites; use --checkpoint for the others")
    result, episodes, engine, source = suite.run(args)
    recorded = result.get("walks", {}).get("recorded", len(episodes))  # seeds tried: those
    # that ended early are named in result["walks"]["ended_early"]
    settings = {"count": len(episodes), "seeds": [args.seed, args.seed + recorded],
                "frames": len(episodes[0]), "policy": args.policy or suite.policy,
                "monsters": "invulnerable" if suite.invulnerable else "on",
                "start": args.start, "maps": args.maps,
                "metric_depth": not args.no_metric_depth}
    if suite.scored_subset:  # the episodes scored: those with a return frame
        settings = {**settings, **result["episodes"], "recorded": len(episodes)}
    result.update(checkpoint=str(source), weights=args.weights, engine=engine,
                  episodes=settings, threads=args.threads, device=args.device)
    print(f"wrote {atomic_write_json(Path(args.out) / f'{args.suite}.json', result)}")
    return 0


def configure_cli(parser) -> None:
    parser.add_argument("--suite", default="quick", choices=suite_choices(),
                        help="quick: next chunk, drift, controls, runtime; autoencoder: "
                             "reconstruction PSNR, SSIM, sharpness and colour; long: a "
                             "minute of open loop against drift-free, autoencoder and "
                             "repeat-last references; revisit: coming back to views seen "
                             "before, with each world's memory; recall: the way out teacher "
                             "forced, scored on return frames only memory can know, each "
                             "world paired with the first --model; full: every protocol of "
                             "the full suite (evaluate.registry: "
                             f"{', '.join(registry.names())}) for the world, the peer and "
                             "repeat-last, with intervals and an HTML report; any other "
                             "name: that protocol of it alone")
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR",
                        help="long, revisit, full and its protocols: a world to score, "
                             "repeatable (same walks); NAME_seedK are seeds of NAME")
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
                        help="held-out episodes (default 8; 2 walks for long, 32 with recall "
                             "frames for recall)")
    parser.add_argument("--start", default=None, choices=STARTS,
                        help="player: the level's start; random: over the reachable level "
                             "(default player; random for long and revisit)")
    parser.add_argument("--maps", default=None,
                        help="doom maps, comma-separated; episode k plays map k mod count")
    parser.add_argument("--policy", default=None, choices=sorted(players.POLICIES),
                        help="the held-out walks' player (default: the suite's; `loops` "
                             "comes back again and again, for the long suite)")
    parser.add_argument("--walls", default=None, choices=("room", "segment"),
                        help="procedural walls: one material per room, or per wall segment "
                             "(default: the engine's; segment for the recall suite)")
    parser.add_argument("--no-metric-depth", action="store_true",
                        help="doom: depth from the engine's coarse uint8 buffer (steps of "
                             "0.22 m) instead of ray casting the level (no open3d needed; "
                             "warp-last is scored with the coarse depth too)")
    parser.add_argument("--frames", type=int, default=None,
                        help="frames per held-out episode: autoencoder (64), long (1000), "
                             "revisit and recall (96) suites")
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
    parser.add_argument("--budget", action="append", default=[], metavar="NAME=TEXT",
                        help="full suite: what the world --model NAME cost to train, in "
                             "words, stated beside its recorded runs; repeatable")
    parser.add_argument("--full-size", action="append", default=[], metavar="KEY=N",
                        help="full suite: change one of its sizes (full.SuiteSizes), e.g. "
                             "episodes=2; repeatable")
    parser.add_argument("--seed", type=int, default=HELDOUT_SEED)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--out", default=str(RUNS / "eval"))
    parser.set_defaults(func=_cli)
