"""`python -m worldlab table worlds | memory | long-horizon | fast-decoder | geometry |
recall | loops`: a shipped table's JSON from evaluation outputs (or, for worlds,
fast-decoder, geometry, recall and loops, from measuring), written atomically to --out
(default runs/tables/<name>.json) without provenance: the experiment runner's ship stage
adds the spec, commit and command. Strips (PNG) go beside the JSON.

    python -m worldlab table memory --report runs/memory/eval/revisit.json --best retrieval
    python -m worldlab table long-horizon --report runs/long/report/long.json \
        --best self_rollout
    python -m worldlab table worlds --autoencoders a=runs/a/model,b=resample:4
    python -m worldlab table fast-decoder --fast runs/fast_decoder/model
    python -m worldlab table geometry --model none=runs/geometry/worlds/none \
        --model cache3d_own=runs/geometry/worlds/cache3d_own --reference none
    python -m worldlab table loops --model teacher_forcing=runs/long/worlds/tf \
        --model self_rollout=runs/long/worlds/sr --reference teacher_forcing --walks 16

Each sub-command is one module (`compare_worlds`, `memory_table`, `long_table`,
`fast_decoder_table`, `geometry_table`, `recall_table`, `loop_table`), imported only when
chosen; its arguments are spelled here.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from .table_io import TABLES

WORLDS_WHAT = ("the wave-1 world (trained on walks from MAP01's player start) against the "
               "world retrained on random starts over MAP01-03")  # table worlds --what
FAST_TRAIN_COMMAND = ("OMP_NUM_THREADS=1 python -m worldlab train decoder --world "
                      "data/checkpoints/doom64_teacher --data runs/w2/data900 "
                      "--latents runs/w2/data/latents "
                      "--out runs/fast_decoder --minutes 11 --device cpu")


def _run(args) -> int:
    if args.out is None:
        default = TABLE_COMMANDS[args.table][1]
        if args.table == "worlds" and args.autoencoders:
            default = "autoencoders.json"
        args.out = TABLES / default
    return importlib.import_module(TABLE_COMMANDS[args.table][0]).cli(args)


def _worlds(p) -> None:
    p.add_argument("--old", default="data/checkpoints/doom64_v1")
    p.add_argument("--new", default="data/checkpoints/doom64_teacher")
    p.add_argument("--old-data", default="runs/w2/old_data")
    p.add_argument("--new-data", default="runs/w2/data900")
    p.add_argument("--parts", default="coverage,autoencoder,world,strip")
    p.add_argument("--which", default="old,new", help="measure these worlds only (the "
                   "table and the strip are written when both are measured)")
    p.add_argument("--cache", default="runs/compare")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--what", default=WORLDS_WHAT,
                   help="what --old and --new are, for the table's JSON")
    p.add_argument("--strip", default=None, metavar="PNG",
                   help="file name of the strip, beside --out (default <out stem>_strip.png)")
    p.add_argument("--strip-also", default=None, metavar="NAME=DIR,...",
                   help="more worlds as rows of the strip (not scored)")
    p.add_argument("--autoencoders", default=None, metavar="NAME=DIR,...",
                   help="instead: score these autoencoders alone, table to --out (default "
                        "runs/tables/autoencoders.json)")
    p.add_argument("--ae-strip", default=None, metavar="PNG",
                   help="with --autoencoders: file name (beside --out) of a PNG of their "
                        "reconstructions of the same frames")
    p.add_argument("--ae-strip-rows", default=None, metavar="NAME,...",
                   help="the --autoencoders rows of that strip (default: all)")


def _memory(p) -> None:
    p.add_argument("--report", nargs="+", type=Path, required=True,
                   help="revisit.json of the reported walks (several: subsets of worlds)")
    p.add_argument("--validation", nargs="*", type=Path, default=[],
                   help="revisit.json of the validation walks")
    p.add_argument("--best", required=True, help="the variant the validation walks chose")
    p.add_argument("--costs", type=Path, default=None,
                   help="bench memory's JSON: the cost columns, every world side by side")
    p.add_argument("--budget", default="", help="the training budget, in words")
    p.add_argument("--note", default="", help="anything a reader must know")
    p.add_argument("--strip", nargs="*", default=[], metavar="NAME",
                   help="worlds (under --worlds) for memory_strip.png, in column order")
    p.add_argument("--worlds", default="runs/memory/worlds", help="where --strip's worlds are")
    p.add_argument("--steps", type=int, default=8, help="sampling steps of the strip")


def _long_horizon(p) -> None:
    p.add_argument("--report", nargs="+", type=Path, required=True,
                   help="long.json of the reported walks (several: subsets of the worlds)")
    p.add_argument("--validation", nargs="*", type=Path, default=[],
                   help="long.json of the validation walk")
    p.add_argument("--quick", nargs="*", type=Path, default=[],
                   help="quick.json of worlds (runs/long/quick/NAME/quick.json)")
    p.add_argument("--best", required=True, help="the method the validation walk chose")
    p.add_argument("--note", default="", help="anything a reader must know")
    p.add_argument("--strip", nargs="*", default=[], metavar="NAME",
                   help="worlds (under --worlds) for long_horizon_strip.png, in row order")
    p.add_argument("--worlds", default="runs/long/worlds", help="where --strip's worlds are")
    p.add_argument("--steps", type=int, default=8, help="sampling steps of the strip")


def _fast_decoder(p) -> None:
    p.add_argument("--world", default="data/checkpoints/doom64_teacher")
    p.add_argument("--fast", default="runs/fast_decoder/model", help="train decoder's model")
    p.add_argument("--packaged", default="runs/fast_decoder/world",
                   help="where the world with its fast decoder is written")
    p.add_argument("--episodes", type=int, default=8)
    p.add_argument("--chunks", type=int, default=50)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--train-command", default=FAST_TRAIN_COMMAND,
                   help="the command that trained --fast, recorded in the JSON")


def _paired(p, walks: str, frames: int, seed: int, cache: str) -> None:
    """What the tables that pair variants seed by seed on fresh held-out walks share."""
    p.add_argument("--model", action="append", required=True, metavar="NAME=DIR",
                   help="a world to score (repeat; rows NAME_seedN are NAME's other seeds)")
    p.add_argument("--reference", required=True,
                   help="the variant every other is paired with, seed by seed")
    p.add_argument("--walks", type=int, default=32, help=walks)
    p.add_argument("--frames", type=int, default=frames, help="frames per walk")
    p.add_argument("--seed", type=int, default=seed, help="the first walk's seed")
    p.add_argument("--budget", default="", help="the training budget, in words")
    p.add_argument("--cache", default=cache,
                   help="each world's scores, so a rerun measures only what is missing")
    p.add_argument("--threads", type=int, default=2)


def _score_only(p) -> None:
    p.add_argument("--score-only", action="store_true",
                   help="score the --model worlds into --cache and write their scores to "
                        "--out, no table (one job per world; the table's own call then "
                        "reads them); --reference need not be among them")


def _geometry(p) -> None:
    _paired(p, "held-out walks per map set", 64, 1_000_000, "runs/geometry/scores")
    p.add_argument("--starts", type=int, default=4, help="scored chunks per walk")


def _blocks(p, default: str) -> None:
    """The tables with one block per engine: which block this call makes, and an earlier
    call's table whose blocks go beside it."""
    p.add_argument("--block", default=default, help="the table's block: engines.<this>")
    p.add_argument("--beside", default=None, metavar="JSON",
                   help="a table of the same reference made for another engine: its "
                        "blocks are kept beside this one's")


def _best_and_strip(p, strip: str) -> None:
    p.add_argument("--strip", action="store_true",
                   help=f"a PNG beside --out (<out>_strip.png): {strip}")
    p.add_argument("--best-from", default=None, metavar="JSON",
                   help="the same table on validation walks: the best row (the bars', the "
                        "strip's) is chosen there; without it, on these walks")


def _recall(p) -> None:
    _paired(p, "walks with recall frames", 96, 1_200_000, "runs/recall/scores")
    p.add_argument("--time-walks", type=int, default=4,
                   help="walks on which every variant's first seed is timed, the worlds "
                        "taking turns on one thread (CPU ms per chunk: a fair ratio on a "
                        "busy machine)")
    _score_only(p)
    p.add_argument("--engine", choices=("doom", "procedural"), default="doom")
    p.add_argument("--maps", default="MAP04", help="DOOM maps of the walks (comma-separated)")
    p.add_argument("--walls", choices=("room", "segment"), default=None,
                   help="procedural walls: one material per room or per wall segment")
    _best_and_strip(p, "the moment of return on the walk with the most recall frames, "
                       "engine | the reference | the best variant | the oracle")
    p.add_argument("--run", action="append", default=[], metavar="NAME=DIR",
                   help="a training run (repeat): its memory gates over training go in the "
                        "block (gates.NAME)")
    _blocks(p, "doom_heldout_map")


def _loops(p) -> None:
    _paired(p, "loop walks per engine", 1000, 1_400_000, "runs/long/scores")
    _score_only(p)
    p.add_argument("--engine", choices=("doom", "procedural"), default="procedural")
    p.add_argument("--maps", default="MAP04", help="DOOM maps of the walks (comma-separated)")
    p.add_argument("--explore", type=int, default=288,
                   help="frames of each walk given from the engine before the open loop (a "
                        "whole number of chunks; default: the loops' first lap); 0: one chunk")
    _best_and_strip(p, "frames 100 and 500 of the open loop and the last of the first walk, "
                       "engine | the reference | the best method")
    _blocks(p, "procedural")


def _defaults(p) -> None:
    p.add_argument("--world", action="append", required=True, metavar="NAME=DIR",
                   help="a default world (repeat: doom64=..., proc64=...)")
    p.add_argument("--old", action="append", required=True, metavar="NAME=DIR",
                   help="the default it replaces, scored on the same walks (one per --world)")
    p.add_argument("--walks", type=int, default=32, help="held-out walks per world")
    p.add_argument("--event-walks", type=int, default=32,
                   help="prompted and unprompted walks for the events (0: none)")
    p.add_argument("--seed", type=int, default=1_100_000, help="the first walk's seed")
    p.add_argument("--budget", default="", help="what the worlds cost to make, in words")
    p.add_argument("--strip", action="store_true",
                   help="a PNG beside --out (<out>_strip.png): each world's first walk, rows "
                        "engine | the old world | the world, open loop from one true chunk")
    p.add_argument("--cache", default="runs/worlds/scores")
    p.add_argument("--threads", type=int, default=2)


# sub-command -> (module with cli(args), the table's default JSON under runs/tables/, its
# arguments, help): a new table is a module plus one line here
TABLE_COMMANDS: dict[str, tuple] = {
    "defaults": ("worldlab.evaluate.defaults_table", "worlds.json", _defaults,
                 "each default world against the default it replaces, with the bars"),
    "worlds": ("worldlab.evaluate.compare_worlds", "worlds.json", _worlds,
               "old world against new (or --autoencoders alone) on the engine's ground truth"),
    "memory": ("worldlab.evaluate.memory_table", "memory.json", _memory,
               "the memory variants' revisit scores, pooled over seeds, with the bars"),
    "long-horizon": ("worldlab.evaluate.long_table", "long_horizon_random_walks.json",
                     _long_horizon,
                     "the long-horizon methods on random walks, pooled over seeds"),
    "fast-decoder": ("worldlab.evaluate.fast_decoder_table", "fast_decoder.json", _fast_decoder,
                     "the fast decoder against the full one: quality and speed"),
    "geometry": ("worldlab.evaluate.geometry_table", "geometry_world.json", _geometry,
                 "worlds with and without the geometry input against warp-last, next chunk"),
    "recall": ("worldlab.evaluate.recall_table", "memory_recall.json", _recall,
               "the recall protocol: return frames only memory can know, paired by seed"),
    "loops": ("worldlab.evaluate.loop_table", "long_horizon.json", _loops,
              "long horizon on loop walks: late and loop-closure PSNR, paired by seed"),
}


def configure_cli(parser) -> None:
    """The `table` command: one sub-command per table, each with --out."""
    sub = parser.add_subparsers(dest="table", metavar="table", required=True)
    for name, (_, default, arguments, help_) in TABLE_COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        arguments(p)
        p.add_argument("--out", type=Path, default=None,
                       help=f"the table's JSON (default runs/tables/{default}); strips go "
                            f"beside it")
        p.set_defaults(func=_run)
