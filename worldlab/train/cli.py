"""`python -m worldlab train autoencoder | world | encode | distill | decoder | long-horizon |
memory | depth-head | diamond | probes | package`:
the recipes (`recipes.py`, `distill.py`, `decoder.py`, `long_horizon.py`, `memory.py`,
`depth_head.py`, `diamond.py`, `probes.py`) with a progress bar and a summary line.

    python -m worldlab train autoencoder --preset small --data runs/data/doom --out runs/ae
    python -m worldlab train world --preset small --data runs/data/doom \
        --autoencoder runs/ae/model --out runs/world
    python -m worldlab train world --recipe level_world --data runs/w2/data900 \
        --autoencoder data/checkpoints/doom64_teacher/autoencoder --out runs/level_world
    python -m worldlab train encode --data runs/mem/data \
        --autoencoder data/checkpoints/doom64_teacher/autoencoder
    python -m worldlab train package --autoencoder runs/ae/model --world runs/world \
        --out runs/myworld
    python -m worldlab train check --preset base --accelerate-config configs/accelerate/fsdp.yaml
    python -m worldlab train decoder --world data/checkpoints/doom64 --data runs/data/doom \
        --latents runs/data/doom/latents --out runs/fast_decoder
    python -m worldlab train depth-head --data runs/mem/data --out runs/memory/depth_head
    python -m worldlab train diamond --data runs/w2/data900 --out runs/peer --minutes 45
    python -m worldlab train probes --engine doom --motion-data runs/w2/data \
        --out data/checkpoints/probes/doom
"""

from __future__ import annotations

import argparse
import ast
from typing import Any

from ..config import (CACHE3D, COMPOSITES, DECODERS, PAINT_VIEWS, PRESETS, WORLD_RECIPES,
                      make_config, recipe_config)
from . import hardware, recipes
from .checkpoints import latest_checkpoint, load_transformer
from ..episodes import EpisodeStore
from ..threads import use_threads
from .depth_head import MAX_TRAIN_FRAMES, load_depth_head
from .long_horizon import METHODS
from .memory import REVISIT_OVERLAP, VARIANTS as MEMORY_VARIANTS


class Progress:
    """A tqdm bar for a recipe: `on_start` opens it with the planned steps, calling it with
    fit's state advances it. The only progress bar of training lives here, in a front end."""

    def __init__(self, what: str):
        self.what, self.bar = what, None

    def on_start(self, plan: dict) -> None:
        from tqdm.auto import tqdm

        if plan.get("encoded"):
            print(f"encoded {plan['encoded']} episodes into {plan['latents']}")
        items = ", ".join(f"{v:,} {k}" for k, v in plan.items()
                          if k not in ("steps", "encoded", "latents"))
        print(f"{self.what}: {items}, {plan['steps']} steps")
        self.bar = tqdm(total=plan["steps"], unit="step")

    def __call__(self, state: dict) -> None:
        bar = self.bar
        if bar.n == 0 and state["step"] > 1:  # resumed: rate and ETA from here, not step 0
            bar.reset(bar.total)
            bar.initial = bar.n = state["step"] - 1
        bar.n = state["step"]
        bar.set_postfix(loss=f"{state['loss']:.4f}", lr=f"{state['lr']:.2e}", refresh=False)
        bar.refresh()

    @property
    def hooks(self) -> dict:
        """The keyword arguments a recipe takes to report to this bar."""
        return {"callbacks": [self], "on_start": self.on_start}

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """["model__width=128", "train__forcing=teacher"] -> {"model__width": 128, ...}.

    Values are Python literals when they parse as one, else strings; make_config then
    rejects unknown keys by name.
    """
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or "__" not in key:
            raise ValueError(f"--set expects SECTION__FIELD=VALUE, got {pair!r}")
        try:
            out[key.strip()] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key.strip()] = value
    return out


def _config(args):
    overrides = parse_overrides(args.set)
    if args.what == "autoencoder" and (unread := [k for k in overrides
                                                  if k.startswith("train__")]):
        raise ValueError(f"--set {unread[0]}: `train autoencoder` reads the autoencoder "
                         f"section alone (its steps, lr, batch_size, seed); set "
                         f"autoencoder__{unread[0].removeprefix('train__')} instead")
    recipe = getattr(args, "recipe", None)
    if recipe is None:
        cfg = make_config(args.preset or "small", **overrides)
    elif args.preset is not None:
        raise ValueError(f"--recipe {recipe} sets its own preset "
                         f"({WORLD_RECIPES[recipe][0]}); drop --preset {args.preset}")
    else:
        cfg = recipe_config(recipe, **overrides)
    section = cfg.autoencoder if args.what == "autoencoder" else cfg.train
    if args.steps is not None:
        section.steps = args.steps
    if args.batch_size is not None:
        section.batch_size = args.batch_size
    return cfg


def _cli_autoencoder(args) -> int:
    with Progress("autoencoder") as progress:
        run = recipes.autoencoder(args.data, _config(args).autoencoder, args.out,
                                  holdout=args.holdout, init=args.init,
                                  minutes=args.minutes,
                                  device=args.device, resume=args.resume, **progress.hooks)
    print(f"held-out ({len(run.held_ids)} episodes): PSNR {run.scores['psnr']:.2f} dB, "
          f"SSIM {run.scores['ssim']:.4f}")
    return 0


def _cli_world(args) -> int:
    if args.init and args.init_transformer:
        raise ValueError(f"--init {args.init} starts from all of a world's weights and "
                         f"--init-transformer {args.init_transformer} from all but its "
                         f"tokeniser; pass one")
    init, load_init = args.init, None
    if args.init_transformer:
        init, load_init = args.init_transformer, load_transformer
    resume = args.resume
    if resume and init is not None:  # as `train autoencoder`: start from init, or continue
        if latest_checkpoint(args.out) is None:
            resume = False
        else:
            init = load_init = None
    with Progress("world model") as progress:
        run = recipes.world(args.data, _config(args), args.out, autoencoder=args.autoencoder,
                            latents=args.latents, text=not args.no_text,
                            captions=args.captions, init=init, load_init=load_init,
                            minutes=args.minutes, device=args.device, resume=resume,
                            **progress.hooks)
    print(f"step {run.state['step']}: loss {run.state.get('loss', float('nan')):.4f}; "
          f"saved {args.out}")
    return 0


def _cli_encode(args) -> int:
    from ..episodes import LatentCache

    store = EpisodeStore.open(args.data)
    latents = LatentCache(args.latents or store.root / "latents")
    n = recipes.fill_latents(store, latents, args.autoencoder, args.device)
    print(f"encoded {n} episodes into {latents.root} "
          f"({len(store.ids()) - n} already there)")
    return 0


def _cli_distill(args) -> int:
    from .distill import distill

    d = make_config("small", **parse_overrides(args.set)).distill
    d.recipe = args.recipe
    for name in ("steps", "batch_size", "student_steps"):
        if getattr(args, name) is not None:
            setattr(d, name, getattr(args, name))
    with Progress(f"distill ({args.recipe})") as progress:
        run = distill(args.teacher, args.data, d, args.out, latents=args.latents,
                      student_init=args.student_init, minutes=args.minutes,
                      device=args.device, resume=args.resume, **progress.hooks)
    print(f"{run.config.sample.steps}-step student, step {run.state['step']}: "
          f"pairs {run.seconds['pairs']:.0f} s, training {run.seconds['train']:.0f} s; "
          f"package it with: train package --autoencoder {args.teacher}/autoencoder "
          f"--world {args.out} --out DIR")
    return 0


def _cli_long_horizon(args) -> int:
    from .long_horizon import finetune

    with Progress(f"long horizon ({args.method})") as progress:
        run = finetune(args.start, args.method, args.data, args.out, steps=args.steps,
                       batch_size=args.batch_size, seed=args.seed, latents=args.latents,
                       device=args.device, resume=args.resume, **progress.hooks)
    return _finetuned(run, args)


def _finetuned(run, args) -> int:
    """What a fine-tune's command prints at the end: its last loss, how to package it."""
    print(f"step {run.state['step']}: loss {run.state.get('loss', float('nan')):.4f}; package "
          f"it with: train package --autoencoder {args.start}/autoencoder --world {args.out} "
          f"--out DIR")
    return 0


def _cli_events(args) -> int:
    from .events import finetune

    with Progress(f"events ({args.event})") as progress:
        run = finetune(args.start, args.data, args.out, event=args.event, share=args.share,
                       steps=args.steps, batch_size=args.batch_size, seed=args.seed,
                       latents=args.latents, device=args.device, resume=args.resume,
                       **progress.hooks)
    return _finetuned(run, args)


def _cli_memory(args) -> int:
    from .memory import finetune

    store = EpisodeStore.open(args.data)
    ids = sorted(store.index)[:args.episodes] if args.episodes else None
    from contextlib import nullcontext

    from tqdm.auto import tqdm

    head = None if args.depth_head is None else load_depth_head(args.depth_head)
    fused = MEMORY_VARIANTS[args.variant].get("memory", {}).get("cache3d")  # inputs to render
    with Progress(f"memory ({args.variant})") as progress, \
            (tqdm(desc="3D-cache inputs", unit="clip") if fused else nullcontext()) as bar:
        run = finetune(args.start, args.variant, store, args.out, steps=args.steps,
                       batch_size=args.batch_size, seed=args.seed, ids=ids, depth_head=head,
                       min_overlap=args.min_overlap,
                       max_window_overlap=args.max_window_overlap, latents=args.latents,
                       own_memory=args.own_memory, device=args.device, resume=args.resume,
                       progress=bar.update if fused else None, **progress.hooks)
    return _finetuned(run, args)


def _cli_package(args) -> int:
    out = recipes.package(args.autoencoder, args.world, args.out, args.weights,
                          half=not args.full, fast_decoder=args.fast_decoder,
                          depth_head=args.depth_head,
                          sample={k: v for k, v in (("decoder", args.decoder),
                                                    ("composite", args.composite),
                                                    ("paint_yield", args.paint_yield),
                                                    ("paint_view", args.paint_view))
                                  if v is not None} or None,
                          memory={k: v for k, v in (("cache3d", args.cache3d),
                                                    ("cache_points", args.cache_points))
                                  if v is not None} or None)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"packaged {out} ({size / 2**20:.1f} MiB)")
    return 0


def _cli_decoder(args) -> int:
    from .decoder import decoder_train_config, distill_decoder

    overrides = {k: v for k, v in (("steps", args.steps), ("batch_size", args.batch_size))
                 if v is not None}
    with Progress("fast decoder") as progress:
        run = distill_decoder(args.world, args.data, args.latents, args.out,
                              target=args.target, cfg=decoder_train_config(**overrides),
                              minutes=args.minutes, device=args.device, resume=args.resume,
                              **progress.hooks)
    s = run.scores
    print(f"held-out ({s['frames']} frames): fast PSNR {s['fast_psnr']:.2f} dB, full "
          f"{s['full_psnr']:.2f} dB; saved {args.out}/model (package_world(fast_decoder=...))")
    return 0


def _cli_depth_head(args) -> int:
    from ..model.depth_head import DepthHead
    from .depth_head import train_depth_head

    head = None if args.channels is None else recipes.seeded(
        lambda: DepthHead(block_out_channels=args.channels), args.seed)
    with Progress("depth head") as progress:
        run = train_depth_head(args.data, args.out, steps=args.steps, head=head,
                               batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                               device=args.device, max_frames=args.max_frames,
                               resume=args.resume, **progress.hooks)
    s = run.scores
    print(f"held-out ({s['frames']} frames of {len(run.held_ids)} episodes): abs_rel "
          f"{s['abs_rel']:.4f}, delta1 {s['delta1']:.4f}, l1_log {s['l1_log']:.4f}; saved "
          f"{args.out}/model (memory.cache3d = own)")
    return 0


def _cli_probes(args) -> int:
    from tqdm.auto import tqdm

    from .probes import train_probes

    use_threads(args.threads)
    with tqdm(total=args.walks + args.held_walks, desc="probe walks", unit="walk") as bar:
        run = train_probes(args.engine, args.out, walks=args.walks, held_walks=args.held_walks,
                           frames=args.frames, size=args.size, gap=args.gap, steps=args.steps,
                           batch_size=args.batch_size, seed=args.seed,
                           motion_store=args.motion_data, device=args.device,
                           progress=bar.update)
    for kind, s in run.report["kinds"].items():
        print(f"kinds probe, {kind}: balanced accuracy {s['balanced_accuracy']:.3f} on "
              f"{s['frames']} held-out frames ({'used' if s['usable'] else 'NOT used'}: bar "
              f"{run.report['accuracy_bar']})")
    for field, s in run.report["motion"].items():
        print(f"motion probe, {field}: mean abs error {s['mae']:.4g} (mean-motion baseline "
              f"{s['mean_motion_mae']:.4g})")
    print(f"saved {args.out}/kinds, {args.out}/motion, {args.out}/probes.json")
    return 0


def _cli_diamond(args) -> int:
    from .diamond import train_diamond

    with Progress("peer (DIAMOND-style U-Net)") as progress:
        run = train_diamond(args.data, args.out, steps=args.steps, minutes=args.minutes,
                            batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                            device=args.device, threads=args.threads, resume=args.resume,
                            **progress.hooks)
    print(f"step {run.state['step']}: loss {run.state.get('loss', float('nan')):.4f} in "
          f"{run.seconds:.0f} s; saved {args.out}/model and {args.out}/ema "
          f"(evaluate.peer.load_peer)")
    return 0


def _cli_check(args) -> int:
    """The memory estimate of a preset against this machine (and an accelerate config)."""
    cfg = _config(args)
    machine = hardware.this_machine(args.device, args.memory_gb)
    processes, sharded = 1, False
    if args.accelerate_config is not None:
        found = hardware.check_accelerate_config(args.accelerate_config, machine)
        processes, sharded = hardware.processes_of(found)
        print(f"{args.accelerate_config}: {processes} process(es), "
              f"{'FSDP' if sharded else 'replicated weights'}: matches this machine")
    channels, size = hardware.latent_geometry(cfg)
    estimate = hardware.train_memory(cfg, channels, size, processes, sharded,
                                     cuda=machine.kind == "cuda")
    data = hardware.clip_tensor_bytes(cfg.data.episodes * cfg.data.frames, channels, size)
    print(f"{cfg.preset} preset, batch {cfg.train.batch_size} per process: "
          f"{hardware.describe(estimate)}")
    print(f"clip tensors of {cfg.data.episodes} x {cfg.data.frames} frames: "
          f"{data / hardware.GIB:.2f} GiB, on the device if they fit beside it")
    hardware.check_memory(estimate, machine, f"the {cfg.preset} preset")
    print(f"fits: {machine.kind} ({machine.name}) has "
          f"{machine.memory_bytes / hardware.GIB:.2f} GiB per device")
    return 0


def _add_common(p) -> None:
    p.add_argument("--preset", default=None, choices=PRESETS,
                   help="config preset (default small)")
    p.add_argument("--data", required=True, help="episode store directory")
    p.add_argument("--out", required=True, help="output directory (checkpoints, model)")
    p.add_argument("--steps", type=int, default=None, help="override the preset's steps")
    p.add_argument("--resume", action="store_true", help="continue from --out's checkpoint")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--batch-size", type=int, default=None, help="override the preset's")
    p.add_argument("--set", action="append", default=[], metavar="SECTION__FIELD=VALUE",
                   help="config override, e.g. --set model__patch_size=2 (repeatable)")
    p.add_argument("--minutes", type=float, default=None,
                   help="wall-clock budget: the step count is timed to fit it (replaces --steps)")
    p.add_argument("--init", default=None, metavar="DIR",
                   help="start from these weights (a save_pretrained directory, e.g. "
                        "runs/world/ema or data/checkpoints/doom64/autoencoder) with a fresh "
                        "schedule; a world's context window may differ. With --resume: "
                        "continue from --out's checkpoint if it has one, else start here")


def _share(text: str) -> float:
    """An argparse type: a share in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1], got {text!r}")
    return value


def _channels(text: str) -> tuple[int, ...]:
    """An argparse type: positive channel counts, comma separated (at least two levels)."""
    try:
        value = tuple(int(c) for c in text.split(","))
    except ValueError:
        value = ()
    if len(value) < 2 or min(value) < 1:
        raise argparse.ArgumentTypeError(f"expected two or more positive channel counts "
                                         f"such as 16,32,64, got {text!r}")
    return value


def _finetune_arguments(parser, steps: int) -> None:
    """What a fine-tune from another world shares (long-horizon, memory)."""
    parser.add_argument("--start", required=True, help="world directory, e.g. "
                                                       "data/checkpoints/doom64_teacher")
    parser.add_argument("--out", required=True,
                        help="run directory (checkpoints, model, ema)")
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0, help="training seed")
    parser.add_argument("--resume", action="store_true",
                        help="continue from --out's checkpoint")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")


def configure_cli(parser) -> None:
    sub = parser.add_subparsers(dest="what", metavar="what", required=True)
    ae = sub.add_parser("autoencoder", help="train the video autoencoder",
                        description="train the video autoencoder")
    _add_common(ae)
    ae.add_argument("--holdout", type=float, default=0.1,
                    help="share of episodes held out for PSNR/SSIM")
    ae.set_defaults(func=_cli_autoencoder)
    w = sub.add_parser("world", help="train the world model on cached latents",
                       description="train the world model on cached latents")
    _add_common(w)
    w.add_argument("--autoencoder", default=None,
                   help="autoencoder directory (needed to fill the latent cache)")
    w.add_argument("--latents", default=None, help="latent cache (default <data>/latents)")
    w.add_argument("--no-text", action="store_true", help="train without captions")
    w.add_argument("--captions", default=None,
                   help="caption table (safetensors) to start from; the table used is saved "
                        "as <out>/captions.safetensors")
    w.add_argument("--init-transformer", default=None, metavar="DIR",
                   help="start from this world model's transformer but not its tokeniser "
                        "(patch embedding, output): a world trained on another "
                        "autoencoder's latents, with the same token grid (e.g. 8x latents "
                        "at patch 2 for 4x latents at patch 4); with --resume as --init")
    w.add_argument("--recipe", default=None, choices=sorted(WORLD_RECIPES),
                   help="a named recipe (config.WORLD_RECIPES: its preset and overrides, "
                        "e.g. level_world, doom64_teacher's); --set applies on top")
    w.set_defaults(func=_cli_world)
    en = sub.add_parser("encode", help="fill an episode store's latent cache",
                        description="encode the episodes of a store that its latent cache "
                                    "lacks with an autoencoder (recipes.fill_latents)")
    en.add_argument("--data", required=True, help="episode store directory")
    en.add_argument("--autoencoder", required=True, help="autoencoder directory, e.g. "
                                                         "data/checkpoints/doom64/autoencoder")
    en.add_argument("--latents", default=None, help="latent cache (default <data>/latents)")
    en.add_argument("--device", default="cpu", help="cpu | cuda")
    en.set_defaults(func=_cli_encode)
    c = sub.add_parser("check", help="does a preset fit this machine (and an accelerate "
                                     "config)?", description=hardware.__doc__.split("\n\n")[0])
    c.add_argument("--preset", default=None, choices=PRESETS,
                   help="config preset (default small)")
    c.add_argument("--set", action="append", default=[], metavar="SECTION__FIELD=VALUE",
                   help="config override (repeatable)")
    c.add_argument("--batch-size", type=int, default=None, help="per process")
    c.add_argument("--device", default="auto", help="auto | cpu | cuda")
    c.add_argument("--memory-gb", type=float, default=None,
                   help="use this memory per device instead of the one found")
    c.add_argument("--accelerate-config", default=None, metavar="YAML",
                   help="check this accelerate config against the machine too")
    c.set_defaults(func=_cli_check, steps=None)
    d = sub.add_parser("distill", help="distil a world into a few-step student",
                       description="a few-step student of a world (train/distill.py): "
                                   "ode | consistency | dmd | dmd_clip")
    d.add_argument("--teacher", required=True, help="world directory, e.g. "
                                                    "data/checkpoints/doom64_teacher")
    d.add_argument("--recipe", required=True, choices=["ode", "consistency", "dmd", "dmd_clip"])
    d.add_argument("--data", required=True, help="episode store directory")
    d.add_argument("--latents", default=None,
                   help="latent cache of the teacher's autoencoder (default <data>/latents)")
    d.add_argument("--out", required=True, help="run directory (checkpoints, model, ema)")
    d.add_argument("--student-steps", type=int, default=None, help="default 4")
    d.add_argument("--student-init", default=None, metavar="DIR",
                   help="start the student from these weights (same architecture as the "
                        "teacher), e.g. runs/distill/ode/ema before DMD")
    d.add_argument("--steps", type=int, default=None, help="student steps (distill.steps)")
    d.add_argument("--batch-size", type=int, default=None)
    d.add_argument("--minutes", type=float, default=None,
                   help="wall-clock budget for the student's training (replaces --steps)")
    d.add_argument("--resume", action="store_true", help="continue from --out's checkpoint")
    d.add_argument("--device", default="auto", help="auto | cpu | cuda")
    d.add_argument("--set", action="append", default=[], metavar="distill__FIELD=VALUE",
                   help="distill config override, e.g. --set distill__critic_ratio=2")
    d.set_defaults(func=_cli_distill)
    lh = sub.add_parser("long-horizon", help="fine-tune a world with one anti-drift method",
                        description="a world fine-tuned from another's weights with one "
                                    "long-horizon method (train/long_horizon.py), the same "
                                    "budget for every method")
    lh.add_argument("--method", required=True, choices=list(METHODS))
    lh.add_argument("--data", required=True, help="episode store directory")
    lh.add_argument("--latents", default=None,
                    help="latent cache of the start's autoencoder (default <data>/latents)")
    _finetune_arguments(lh, steps=120)
    lh.set_defaults(func=_cli_long_horizon)
    me = sub.add_parser("memory", help="fine-tune a world with one memory mechanism",
                        description="a world fine-tuned from another's weights with one "
                                    "memory variant (train/memory.py), the same data and "
                                    "budget for every variant")
    me.add_argument("--variant", required=True, choices=list(MEMORY_VARIANTS))
    me.add_argument("--data", required=True, help="episode store (latents in <data>/latents)")
    me.add_argument("--episodes", type=int, default=None,
                    help="train on the first N episodes of the store (default all)")
    me.add_argument("--depth-head", default=None, metavar="DIR",
                    help="the depth head of the 'own' 3D cache (train depth-head's out/model)")
    me.add_argument("--latents", default=None,
                    help="latent cache of the start's autoencoder (default <data>/latents)")
    me.add_argument("--min-overlap", type=_share, default=REVISIT_OVERLAP, metavar="SHARE",
                    help="train on the clips whose last chunk comes back by at least this "
                         "share to a view older than the window (default %(default)s: "
                         "revisits only); 0 trains on every clip, as a world that reads "
                         "its 3D cache every chunk needs")
    me.add_argument("--max-window-overlap", type=_share, default=1.0, metavar="SHARE",
                    help="keep only the clips whose last chunk the window's chunks overlap by "
                         "less than this share, so only memory can show it (default "
                         "%(default)s: no such rule)")
    me.add_argument("--own-memory", type=_share, default=0.0, metavar="SHARE",
                    help="on this share of the samples the retrieved chunks are the model's "
                         "own generations of them, as play's memory holds (default "
                         "%(default)s: the engine's)")
    _finetune_arguments(me, steps=300)
    me.set_defaults(func=_cli_memory)
    ev = sub.add_parser("events", help="fine-tune a world to bring what an event prompt names",
                        description="a world fine-tuned from another's weights on clips whose "
                                    "last chunk starts with an event's prompt, half of them, "
                                    "and the store's other clips (train/events.py)")
    ev.add_argument("--data", required=True,
                    help="episode store with event prompts on chunk starts (data record "
                         "--events summon_monster --event-every <chunk frames>)")
    ev.add_argument("--event", default="summon_monster",
                    help="the engine event the fine-tune teaches (default %(default)s)")
    ev.add_argument("--share", type=_share, default=0.5, metavar="SHARE",
                    help="share of the clips that start the event (default %(default)s)")
    ev.add_argument("--latents", default=None,
                    help="latent cache of the start's autoencoder (default <data>/latents)")
    _finetune_arguments(ev, steps=400)
    ev.set_defaults(func=_cli_events)
    p = sub.add_parser("package", help="assemble a world directory from training outputs",
                       description="autoencoder + world model + config (+ captions) -> one "
                                   "directory that pretrained.load_world reads")
    p.add_argument("--autoencoder", required=True, help="e.g. runs/ae/model")
    p.add_argument("--world", required=True, help="world run directory, e.g. runs/world")
    p.add_argument("--weights", default="ema", help="subfolder of --world: ema | model")
    p.add_argument("--out", required=True, help="e.g. data/checkpoints/doom64")
    p.add_argument("--full", action="store_true", help="keep float32 (default: float16)")
    p.add_argument("--fast-decoder", default=None, metavar="DIR",
                   help="a fast decoder for play (train decoder's out/model), e.g. "
                        "runs/fast_decoder/model")
    p.add_argument("--decoder", choices=DECODERS, default=None,
                   help="the packaged world's sample.decoder (default: the run's config's); "
                        "fast plays with --fast-decoder")
    p.add_argument("--depth-head", default=None, metavar="DIR",
                   help="a depth head for a world with memory.cache3d='own' (train "
                        "depth-head's out/model), e.g. runs/memory/depth_head/model")
    p.add_argument("--composite", choices=COMPOSITES, default=None,
                   help="the packaged world's sample.composite (default: the run's "
                        "config's): 'cache' paints the 3D cache's render into the frames "
                        "where it covers them")
    p.add_argument("--paint-yield", type=_share, default=None, metavar="RATIO",
                   help="the packaged world's sample.paint_yield: where its own pixel is "
                        "nearer than RATIO times the painted render's depth, it stays (a "
                        "character an event brought is not painted over; needs a depth head)")
    p.add_argument("--paint-view", choices=PAINT_VIEWS, default=None,
                   help="the packaged world's sample.paint_view: the engine's last frame, moved "
                        "into the first chunk's cameras with its depth, is painted first, the "
                        "cache's render where it leaves holes (nearest or bilinear colours)")
    p.add_argument("--cache3d", choices=[c for c in CACHE3D if c != "off"], default=None,
                   help="a 3D cache for a world whose model reads none, kept only to paint "
                        "(with --composite cache; 'own' needs --depth-head)")
    p.add_argument("--cache-points", type=int, default=None, metavar="N",
                   help="the packaged world's memory.cache_points: the 3D cache's bound (the "
                        "default holds about 16 frames; a long walk that comes back needs more)")
    p.set_defaults(func=_cli_package)
    fd = sub.add_parser("decoder", help="distil a world's decoder into a small fast one",
                        description="a FastDecoder trained on a world's cached latents "
                                    "(train/decoder.py), for sample.decoder = fast")
    fd.add_argument("--world", required=True, help="world directory, e.g. "
                                                   "data/checkpoints/doom64_teacher")
    fd.add_argument("--data", required=True, help="episode store directory")
    fd.add_argument("--latents", required=True,
                    help="latent cache of the world's autoencoder for --data's episodes")
    fd.add_argument("--out", required=True, help="run directory (checkpoints, model)")
    fd.add_argument("--target", default="frames", choices=["frames", "decoder"],
                    help="learn the engine's frames or the full decoder's output")
    fd.add_argument("--steps", type=int, default=None, help="default 2000")
    fd.add_argument("--batch-size", type=int, default=None, help="default 16")
    fd.add_argument("--minutes", type=float, default=None,
                    help="wall-clock budget: the step count is timed to fit it (replaces "
                         "--steps)")
    fd.add_argument("--resume", action="store_true", help="continue from --out's checkpoint")
    fd.add_argument("--device", default="auto", help="auto | cpu | cuda")
    fd.set_defaults(func=_cli_decoder)
    _add_depth_head(sub)
    _add_diamond(sub)
    _add_probes(sub)


def _add_probes(sub) -> None:
    pr = sub.add_parser("probes", help="train the evaluation suite's events and camera probes",
                        description="record labelled engine walks, train the kinds probe "
                                    "(which characters are in view) and the motion probe "
                                    "(inverse dynamics between frames), check both on "
                                    "held-out walks (train/probes.py)")
    pr.add_argument("--engine", required=True, choices=("doom", "procedural"))
    pr.add_argument("--out", required=True, help="directory: kinds/, motion/, probes.json")
    pr.add_argument("--motion-data", default=None, metavar="DIR",
                    help="an episode store for the motion probe (e.g. the world's training "
                         "data); default: the labelled walks")
    pr.add_argument("--walks", type=int, default=400)
    pr.add_argument("--held-walks", type=int, default=32)
    pr.add_argument("--frames", type=int, default=64)
    pr.add_argument("--size", type=int, default=64)
    pr.add_argument("--gap", type=int, default=2, help="frames between the motion pair")
    pr.add_argument("--steps", type=int, default=4000)
    pr.add_argument("--batch-size", type=int, default=64)
    pr.add_argument("--seed", type=int, default=0)
    pr.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    pr.add_argument("--device", default="cpu", help="auto | cpu | cuda")
    pr.set_defaults(func=_cli_probes)


def _add_diamond(sub) -> None:
    pe = sub.add_parser("diamond", help="train the DIAMOND-style peer baseline",
                        description="a pixel-space U-Net world model (DIAMOND-style, EDM "
                                    "preconditioning) on an episode store's frames and "
                                    "actions (train/diamond.py), the peer of the world "
                                    "models in the evaluation tables")
    pe.add_argument("--data", required=True, help="episode store directory")
    pe.add_argument("--out", required=True, help="run directory (checkpoints, model, ema, "
                                                 "train_run.json)")
    budget = pe.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, default=None, help="default 2000")
    budget.add_argument("--minutes", type=float, default=None,
                        help="wall-clock budget: the step count is timed to fit it")
    pe.add_argument("--batch-size", type=int, default=16)
    pe.add_argument("--lr", type=float, default=5e-4)
    pe.add_argument("--seed", type=int, default=0, help="weights, data order, noise")
    pe.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    pe.add_argument("--resume", action="store_true",
                    help="continue from --out's checkpoint (and its planned step count)")
    pe.add_argument("--device", default="cpu", help="auto | cpu | cuda")
    pe.set_defaults(func=_cli_diamond)


def _add_depth_head(sub) -> None:
    dh = sub.add_parser("depth-head", help="train the depth head of the 3D-cache memory",
                        description="a small U-Net from frames to metric depth, trained on "
                                    "an engine's depth (train/depth_head.py), for "
                                    "memory.cache3d = own")
    dh.add_argument("--data", required=True, help="episode store directory, with depth")
    dh.add_argument("--out", required=True, help="run directory (checkpoints, model, "
                                                 "metrics.json)")
    dh.add_argument("--steps", type=int, default=600)
    dh.add_argument("--batch-size", type=int, default=64)
    dh.add_argument("--lr", type=float, default=1e-3)
    dh.add_argument("--seed", type=int, default=0, help="weights, data order, subsample")
    dh.add_argument("--channels", type=_channels, default=None, metavar="C0,C1,...",
                    help="the U-Net's channels per level (default DepthHead's 16,32,64)")
    dh.add_argument("--max-frames", type=int, default=MAX_TRAIN_FRAMES,
                    help="training frames held in memory (whole episodes, subsampled)")
    dh.add_argument("--resume", action="store_true", help="continue from --out's checkpoint")
    dh.add_argument("--device", default="cpu", help="auto | cpu | cuda")
    dh.set_defaults(func=_cli_depth_head)
