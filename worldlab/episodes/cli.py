"""`python -m worldlab data record | info | validate | rebuild-index | subset | import-re10k`.

    python -m worldlab data record --preset small --out runs/data/doom   # the preset's data
    python -m worldlab data record --engine procedural --episodes 8 --frames 64 --size 64 \
        --workers 2 --policy mix --start random --out runs/data/procedural
    python -m worldlab data record --start random --maps MAP01,MAP02 \
        --monsters invulnerable --out runs/data/doom2   # seeds alternate between the maps
    python -m worldlab data record --engine procedural --walls segment --start random \
        --out runs/data/proc-segment   # a material per wall segment, posters in every room
    python -m worldlab data info --store runs/data/procedural
    python -m worldlab data validate --store runs/data/procedural   # every damaged file
    python -m worldlab data rebuild-index --store runs/data/procedural   # a new index.json
    python -m worldlab data subset --store runs/data/doom2 --per-map MAP01=8,MAP02=2 \
        --out runs/data/doom2_small   # the first episodes of each map, same ids

`data record` takes every default from the preset's `data` section (`config.DataConfig`);
a flag overrides one field. `--maps` (alias `--map`) takes names joined by "," or "+",
stored in `DataConfig.map` joined by "+". `--maps`, `--monsters` and `--no-metric-depth`
are doom's and `--walls` the procedural engine's (`engines.procedural`): each engine gets
only its own, and `--no-metric-depth` or `--walls` given for the other engine is an error.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import MONSTERS, PRESETS, STARTS, WALLS, make_config
from ..engines import ENGINES
from ..engines.policies import POLICIES
from .recording import format_index, record_many
from .store import EpisodeStore, subset

# flag -> DataConfig field whose preset value is the flag's default
RECORD_FIELDS = {"engine": "engine", "episodes": "episodes", "frames": "frames",
                 "size": "size", "workers": "workers", "policy": "policy",
                 "event_rate": "event_rate", "maps": "map", "start": "start",
                 "monsters": "monsters", "walls": "walls"}


def split_maps(text: str) -> tuple[str, ...]:
    """"MAP01,MAP02" or "MAP01+MAP02" (DataConfig.map) -> ("MAP01", "MAP02")."""
    maps = tuple(m.strip() for m in text.replace(",", "+").split("+"))
    if not all(maps):
        raise ValueError(f"maps must be map names joined by ',' or '+', got {text!r}")
    return maps


def record_settings(args) -> dict:
    """The preset's data section with the flags given on the command line applied; `maps`
    as a tuple of names."""
    data = vars(make_config(args.preset).data)
    settings = {name: data[field] if getattr(args, name) is None else getattr(args, name)
                for name, field in RECORD_FIELDS.items()}
    return {**settings, "maps": split_maps(settings["maps"])}


def _cmd_record(args) -> int:
    from tqdm.auto import tqdm

    s = record_settings(args)
    seeds = list(range(args.seed, args.seed + s["episodes"]))
    # maps and monsters are doom's, walls the procedural engine's
    doom = s["engine"] == "doom"
    opts = {"maps": s["maps"], "monsters": s["monsters"]} if doom else {}
    if s["engine"] == "procedural":
        opts["walls"] = s["walls"]
    elif args.walls is not None:
        raise ValueError(f"--walls is a procedural option; the engine is {s['engine']!r}")
    if args.no_metric_depth:
        if not doom:
            raise ValueError(f"--no-metric-depth is a doom option; the engine is "
                             f"{s['engine']!r}")
        opts["metric_depth"] = False
    if doom:  # before the store exists: a misspelt map leaves no folder behind
        from ..engines.doom import check_maps
        check_maps(s["maps"])
    store = EpisodeStore(args.out)
    with tqdm(total=len(seeds), desc=f"record {s['engine']}", unit="episode") as bar:
        record_many(store, s["engine"], seeds, s["frames"], s["size"], s["policy"],
                    s["event_rate"], s["workers"], callback=lambda _: bar.update(),
                    overwrite=args.overwrite, start=s["start"], event_every=args.event_every,
                    event_kinds=args.events and tuple(args.events.split(",")), **opts)
    print(format_index(store))
    return 0


def _cmd_info(args) -> int:
    print(format_index(EpisodeStore.open(args.store)))
    return 0


def _cmd_subset(args) -> int:
    per_map = {}
    for part in args.per_map.split(","):
        name, sep, count = part.partition("=")
        if not (sep and name.strip() and count.strip().isdigit()):
            raise SystemExit(f"--per-map expects MAP=COUNT,..., got {part!r} in "
                             f"{args.per_map!r}")
        per_map[name.strip()] = int(count)
    target = subset(EpisodeStore.open(args.store), args.out, per_map)
    print(format_index(target))
    return 0


def _cmd_validate(args) -> int:
    problems = EpisodeStore.open(args.store).validate_all()
    for episode_id, problem in problems.items():
        print(f"{episode_id}: {problem}")
    print(f"{len(problems)} problem(s)")
    return 1 if problems else 0


def _cmd_rebuild_index(args) -> int:
    import warnings

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        index = EpisodeStore.open(args.store).rebuild_index()
    for warning in said:  # the damaged files left out, one line each
        print(warning.message)
    print(f"indexed {len(index)} episodes in {args.store}")
    return 1 if said else 0


def _cmd_import_re10k(args) -> int:
    from .realestate import import_realestate10k

    episode = import_realestate10k(args.camera, args.frames, args.size)
    episode_id = EpisodeStore(args.out).write(episode, args.id or Path(args.camera).stem)
    print(f"imported {len(episode)} frames as {episode_id!r} into {args.out} "
          f"(actions: {episode.meta['actions']})")
    return 0


def _add_record(sub) -> None:
    rec = sub.add_parser("record", help="record episodes from an engine into a store",
                         description="defaults come from the preset's data section")
    rec.add_argument("--preset", default="small", choices=PRESETS,
                     help="config preset whose data section gives the defaults")
    rec.add_argument("--engine", default=None, choices=sorted(ENGINES))
    rec.add_argument("--episodes", type=int, default=None)
    rec.add_argument("--frames", type=int, default=None, help="frames per episode")
    rec.add_argument("--size", type=int, default=None, help="frame side in pixels")
    rec.add_argument("--workers", type=int, default=None, help="processes, one engine each")
    rec.add_argument("--policy", default=None, choices=["mix", *POLICIES])
    rec.add_argument("--event-rate", type=float, default=None,
                     help="probability per step of an event prompt")
    rec.add_argument("--event-every", type=int, default=1, metavar="N",
                     help="event prompts only on every N-th step (a world's chunk_frames puts "
                          "each on a chunk's first frame); --event-rate is per such step")
    rec.add_argument("--events", default=None, metavar="NAME,...",
                     help="event prompts of these engine events only (e.g. summon_monster)")
    rec.add_argument("--maps", "--map", dest="maps", default=None,
                     help="doom maps, e.g. MAP01 or MAP01,MAP02 (seeds take them in turn)")
    rec.add_argument("--start", default=None, choices=STARTS,
                     help="player: the map's player start; random: a start drawn from the "
                          "seed anywhere on the level")
    rec.add_argument("--monsters", default=None, choices=MONSTERS,
                     help="doom monsters; invulnerable: monsters, but the player never dies")
    rec.add_argument("--walls", default=None, choices=WALLS,
                     help="procedural walls; room: one material for all of a room's walls; "
                          "segment: one per straight wall segment, and posters that differ "
                          "in every room, so a wall's look is known only by having seen it")
    rec.add_argument("--seed", type=int, default=0, help="episode k uses seed + k")
    rec.add_argument("--no-metric-depth", action="store_true",
                     help="doom: keep the coarse depth buffer, skip the mesh ray cast (3x "
                          "faster, no open3d; enough for training the world model, but it "
                          "saturates at a few metres, so explore sees no far open space)")
    rec.add_argument("--out", required=True, help="store directory, e.g. runs/data/doom")
    rec.add_argument("--overwrite", action="store_true", help="replace episodes with these ids")
    rec.set_defaults(func=_cmd_record)


def configure_cli(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="subcommand")
    _add_record(sub)
    info = sub.add_parser("info", help="print the index summary of a store")
    info.add_argument("--store", required=True)
    info.set_defaults(func=_cmd_info)
    val = sub.add_parser("validate", help="re-read and validate every episode of a store")
    val.add_argument("--store", required=True)
    val.set_defaults(func=_cmd_validate)
    reb = sub.add_parser("rebuild-index", help="write a new index.json from the episode "
                         "files that read whole, naming the damaged ones left out")
    reb.add_argument("--store", required=True)
    reb.set_defaults(func=_cmd_rebuild_index)
    sel = sub.add_parser("subset", help="copy the first episodes of each map into a new "
                         "store (same ids)")
    sel.add_argument("--store", required=True, help="the store to take episodes from")
    sel.add_argument("--out", required=True, help="the new store")
    sel.add_argument("--per-map", required=True, metavar="MAP=COUNT,...",
                     help="e.g. MAP01=600,MAP02=150")
    sel.set_defaults(func=_cmd_subset)
    imp = sub.add_parser("import-re10k", help="import a RealEstate10K clip")
    imp.add_argument("--camera", required=True, help="RealEstate10K camera .txt")
    imp.add_argument("--frames", required=True, help="directory of the clip's frames")
    imp.add_argument("--size", type=int, default=64)
    imp.add_argument("--id", default=None, help="episode id (default: the camera file stem)")
    imp.add_argument("--out", required=True, help="store directory")
    imp.set_defaults(func=_cmd_import_re10k)
