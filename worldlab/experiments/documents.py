"""`python -m worldlab results render | check | list`: the documents' result tables, made
from `data/results/*.json` so that no number in them is typed by hand (STYLE habit 13).

    python -m worldlab results render   # rewrite every marked table in the documents
    python -m worldlab results check    # exit 1 naming each table that is out of date
    python -m worldlab results list     # the index: file, spec, what it holds

A document marks a table with a pair of lines; `render` replaces only the text between them:

    <!-- results:memory -->
    | variant | return PSNR (dB) | ... |
    ...
    <!-- /results:memory -->

Each table is one function of the JSON in `TABLES` (a new table is a function and one line
there). A table ends with a line naming its source JSON and the command that re-makes it
(`python -m worldlab run <spec>` when the JSON was shipped by a spec, else its `command`).
A missing file, a key a table needs that the JSON lacks, or a marker no table answers to is
a ValueError naming the file and the key or marker: nothing is left blank or guessed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..atomic import atomic_write_text
from ..evaluate.budget import summary
from ..evaluate.stats import fmt
from ..paths import ROOT

DOCUMENTS = ("README.md", "data/README.md")  # relative to the repository root
RESULTS = Path("data") / "results"

OPEN = re.compile(r"^<!-- results:(?P<name>[\w.-]+) -->$")
CLOSE = re.compile(r"^<!-- /results:(?P<name>[\w.-]+) -->$")
SEED_COPY = re.compile(r"_seed\d+$")  # `retrieval_seed1`: a training seed of a row, pooled


# ----------------------------------------------------------------------------------------
# Reading a result
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """One `data/results/<name>` file, read; `get` names the file and key it lacks."""

    name: str
    data: dict

    def get(self, *keys):
        value = self.data
        for i, key in enumerate(keys):
            if not isinstance(value, dict) or key not in value:
                path = ".".join(map(str, keys[: i + 1]))
                raise ValueError(f"data/results/{self.name} has no key {path!r}, which its "
                                 f"table needs")
            value = value[key]
        return value

    def made_by(self) -> list[str]:
        """The commands that re-make this file: its experiment spec's run, then those of the
        engine blocks other runs shipped beside it (`--beside`), else (a device run's
        script, a file from before the runner) its own command."""
        blocks = self.data.get("engines", {}).values()
        specs = [self.data.get("spec") or "", *(b.get("spec") or "" for b in blocks)]
        runs = [f"python -m worldlab run {s}" for s in dict.fromkeys(specs)
                if s.startswith("experiments/")]
        return runs or [self.get("command")]


def load_result(results: Path, name: str) -> Result:
    path = Path(results) / name
    if not path.is_file():
        raise ValueError(f"data/results/{name} does not exist ({path}); a table needs it")
    return Result(name, json.loads(path.read_text()))


@dataclass(frozen=True)
class Rendered:
    """A table before it becomes Markdown: header, rows of cells, the files it came from."""

    header: tuple[str, ...]
    rows: list[tuple]
    sources: tuple[Result, ...]  # () for the index, which comes from every file


def num(value, digits: int = 2) -> str:
    """A cell: a float to `digits` decimals, an int as it is, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def pair(a, b, digits: int = 2) -> str:
    return f"{num(a, digits)} / {num(b, digits)}"


def interval(mean, lo_hi) -> str:
    """`fmt` of a mean with a [lo, hi] list (memory's `return_psnr_ci`)."""
    if lo_hi is None:
        return num(mean)
    return fmt({"mean": mean, "lo": lo_hi[0], "hi": lo_hi[1]})


def ci(stats: dict | None) -> str:
    """`fmt` of a {"mean", "lo", "hi"} (a paired difference, a baseline), '' for None."""
    return "" if stats is None else fmt(stats)


def mean_sd(stats: dict) -> str:
    return f"{stats['mean']:.2f} +- {stats['std']:.2f}"


# ----------------------------------------------------------------------------------------
# The tables
# ----------------------------------------------------------------------------------------

# A one-line description of a shipped file (before its `title` or `description` field)
DESCRIPTIONS = {
    "autoencoder_doom64_v1.json": "the wave-1 autoencoder's reconstruction scores",
    "autoencoders.json": "five autoencoders on the same data: 8x vs 4x, decoder only vs whole, "
                         "the patch critic",
    "autoencoders_4x.json": "the 4x autoencoder trained 15x longer, with and without the critic",
    "autoencoders_critic_seeds.json": "the 2x autoencoder with the critic at 0.7, three seeds",
    "autoencoders_critic_weight.json": "the critic's weight between 0.5 and 1",
    "autoencoders_sharpness.json": "the amplitude-spectrum term at 2x, the encoder learning, "
                                   "a light critic, beside bicubic references",
    "autoencoders_wide.json": "8 against 16 latent channels, the critic at smaller patches",
    "bench_train_cpu.json": "training speed of the world model on the 2-core CPU",
    "benchmark.json": "every protocol for doom64 and proc64 with the peer and repeat-last",
    "browser_play_busy.json": "key to frame in the browser, both cores busy",
    "browser_play_idle.json": "key to frame in the browser, idle machine",
    "compression_cost.json": "what less spatial compression costs the world model's speed",
    "coverage.json": "share of MAP01's reachable floor the training walks cover",
    "distill.json": "the teacher and its few-step students side by side: quality and speed",
    "distill_dmd_from_ode.json": "DMD started from the ODE student",
    "eval_quick_doom64_v1.json": "the wave-1 world on the quick suite",
    "fast_decoder.json": "the distilled fast decoder against the full decoder",
    "geometry_recall.json": "the worlds with and without the geometry input on the recall "
                            "protocol, held-out map",
    "geometry_world.json": "the world given the 3D cache as input against the same world "
                           "without it, and warp-last, on the next chunk",
    "inference.json": "int8 and torch.compile: speed and quality loss",
    "long_horizon.json": "anti-drift methods on 1,000-frame loop walks, paired by seed with "
                         "teacher forcing; late and loop-closure PSNR",
    "long_horizon_random_walks.json": "anti-drift methods over two 1,000-frame random walks "
                                      "(the earlier protocol)",
    "long_horizon_sink.json": "the attention sink world on the long-horizon walks",
    "long_horizon_steps.json": "the long-horizon drift with 16 and 8 sampling steps",
    "memory.json": "memory variants on revisit walks: return frames, cost, bars",
    "memory_budget.json": "memory variants at a larger training budget",
    "memory_recall.json": "every memory variant where only memory knows the answer (the "
                          "recall protocol), procedural worlds and DOOM's held-out map",
    "memory_budget_600.json": "memory variants at 600 training steps",
    "memory_cost.json": "memory variants' streaming cost over 100 chunks",
    "world_2x.json": "the world model on 2x latents",
    "world_4x.json": "the world model moved onto 4x latents",
    "world_4x_1600.json": "the 4x world trained to 1,600 steps",
    "world_longer_finetune.json": "the level world fine-tuned longer",
    "world_wide.json": "the world model on 16-channel latents",
    "worlds.json": "each default world painting what it has seen against the one it "
                   "replaces, with the world issue's bars",
}


def describe(r: Result) -> str:
    """The file's line in DESCRIPTIONS, else its `title` or `description` (a spec that
    ships several tables gives each its own title, so the line comes first)."""
    if r.name in DESCRIPTIONS:
        return DESCRIPTIONS[r.name]
    for key in ("title", "description"):
        if r.data.get(key):
            return " ".join(str(r.data[key]).split())
    raise ValueError(f"data/results/{r.name} has no key 'title' or 'description' and no "
                     f"line in documents.DESCRIPTIONS: add one of them")


def index(results: Path) -> Rendered:
    rows = []
    for path in sorted(Path(results).glob("*.json")):
        r = load_result(results, path.name)
        commit = str(r.get("commit")).split()[0][:7]
        spec = f"`{r.data['spec']}`" if r.data.get("spec") else "-"
        rows.append((f"`{r.name}`", spec, commit, r.get("measured"), describe(r)))
    return Rendered(("file", "spec", "commit", "measured", "what it holds"), rows, ())


def worlds(results: Path) -> Rendered:
    """Each default world (`table defaults`) and the default it replaces, on the same walks:
    next chunk with its interval beside warp-last, repeat-last and the autoencoder; the
    128-frame open loop against repeat-last; mirrored controls; sharpness; realism; events."""
    r = load_result(results, "worlds.json")
    rows, seen = [], set()
    for name, b in r.get("worlds").items():
        for which, s, path in (("new", b["world"], b["checkpoint"]),
                               ("old", b["old"]["world"], b["old"]["checkpoint"])):
            if path in seen:  # an old world a block before already showed (the same walks)
                continue
            seen.add(path)
            events = (pair(s["event_hit_rate"], s["event_false_alarm_rate"])
                      if "event_hit_rate" in s else "-")
            rows.append((f"{name}, {which} ({path}; {b['walks']} walks)", *_next_chunk_cells(s),
                         pair(s["rollout128_psnr_mean"], s["rollout128_repeat_psnr_mean"]),
                         num(s["mirrored_drop_db"]), num(s["rollout_sharpness_ratio"]),
                         f"{num(s.get('realism_distance'), 1)} (autoencoder "
                         f"{num(s.get('realism_distance_ae'), 1)}, repeat-last "
                         f"{num(s.get('realism_distance_repeat'), 1)})", events))
            if "heldout_map" in s:  # DOOM: next chunk on a map no world trained on too
                rows.append((f"{name}, {which}, held-out {', '.join(b['heldout_map'])}",
                             *_next_chunk_cells(s["heldout_map"]), *("-",) * 5))
    header = ("world", "next chunk (dB)",
              "warp-last / view warp with the engine's depth / repeat-last (dB)",
              "autoencoder (dB)",
              "128-frame open loop / repeat-last (dB)", "mirrored controls cost (dB)",
              "sharpness / engine's", "realism distance (lower is better)",
              "events: hit / false-alarm rate")
    return Rendered(header, rows, (r,))


def _next_chunk_cells(s: dict) -> tuple[str, str, str]:
    """A `table defaults` next-chunk row's cells: the world with its interval, warp-last /
    the view warp with the engine's depth (geometry alone, where the table has it) /
    repeat-last, the autoencoder."""
    baselines = (s["baseline_warp_psnr"], s.get("baseline_view_warp_psnr"),
                 s["baseline_repeat_psnr"])
    return (interval(s["next_chunk_psnr"], s["next_chunk_psnr_ci"]),
            " / ".join(num(b) for b in baselines), num(s["autoencoder_psnr"]))


def worlds_bars(results: Path) -> Rendered:
    """The world issue's bars (`defaults_table.BARS`), each default world's value and
    whether it is met."""
    from ..evaluate.defaults_table import BARS  # here: it imports the engines and models

    r = load_result(results, "worlds.json")
    blocks = r.get("worlds")
    return Rendered(("bar", "needs", *blocks), bars_met(BARS, blocks), (r,))


def bars_met(bars: dict, blocks: dict) -> list[tuple]:
    """One row per bar (`memory_bars.Bar`): what it asks, what it needs, then each block's
    value (its `bars[key]`) and whether it is met, '-' where the block lacks it."""
    return [(bar.what, bar.need,
             *(f"{num(b['bars'][key])} ({'met' if bar.met(b['bars'][key]) else 'not met'})"
               if key in b["bars"] else "-" for b in blocks.values()))
            for key, bar in bars.items()]


def _benchmark_rows(world: str, r: Result) -> list[tuple]:
    """The headline protocols of one world: model, repeat-last, warp-last, peer, engine."""
    w = ("worlds", world)
    nc, drift, cam = (*w, "next_chunk"), (*w, "drift"), (*w, "camera")
    ev, gen = (*w, "events", "rows"), (*w, "generalisation")
    unseen = ("unseen map " + "+".join(r.get(*gen, "maps")) if r.get(*gen, "maps")
              else "unseen seeds")

    def yaw(model):
        return num(r.get(*cam, model, "controls", "yaw", "ratio"))

    rows = [
        (world, "next chunk PSNR (dB)", fmt(r.get(*nc, "world", "psnr")),
         fmt(r.get(*nc, "repeat", "psnr")), num(r.get(*nc, "world", "baseline_warp_psnr")),
         fmt(r.get(*nc, "peer", "psnr")),
         f"{num(r.get(*nc, 'world', 'autoencoder_psnr'))} (autoencoder)"),
        (world, "open loop, 32 frames, mean PSNR (dB)", fmt(r.get(*drift, "world", "psnr")),
         fmt(r.get(*drift, "repeat", "psnr")), "-", fmt(r.get(*drift, "peer", "psnr")), "-"),
        (world, "mirrored controls: PSNR drop (dB)",
         fmt(r.get(*drift, "world", "mirrored_drop_db")),
         fmt(r.get(*drift, "repeat", "mirrored_drop_db")), "-",
         fmt(r.get(*drift, "peer", "mirrored_drop_db")), "-"),
        (world, "camera yaw error / the probe's error on engine frames", yaw("world"),
         yaw("repeat"), "-", yaw("peer"), "1.00"),
        (world, f"{r.get(*w, 'events', 'kind')} shown after its prompt (share)",
         fmt(r.get(*ev, "world", "hit_share")), fmt(r.get(*ev, "repeat", "hit_share")), "-",
         fmt(r.get(*ev, "peer", "hit_share")), fmt(r.get(*ev, "engine_probe", "hit_share"))),
        (world, "false alarms without a prompt (share)",
         fmt(r.get(*ev, "world", "false_alarm_share")),
         fmt(r.get(*ev, "repeat", "false_alarm_share")), "-",
         fmt(r.get(*ev, "peer", "false_alarm_share")),
         fmt(r.get(*ev, "engine_probe", "false_alarm_share"))),
        (world, f"{unseen}: next chunk PSNR (dB)",
         fmt(r.get(*gen, "next_chunk", "world", "psnr")),
         fmt(r.get(*gen, "next_chunk", "repeat", "psnr")),
         num(r.get(*gen, "next_chunk", "world", "baseline_warp_psnr")),
         fmt(r.get(*gen, "next_chunk", "peer", "psnr")),
         f"{num(r.get(*gen, 'next_chunk', 'world', 'autoencoder_psnr'))} (autoencoder)"),
    ]
    budgets = r.get(*w).get("budget")  # none in results written before they were recorded
    if budgets is not None:
        rows.append((world, "training budget", summary(budgets["world"]), summary(None), "-",
                     summary(budgets["peer"]) if "peer" in budgets else "-", "-"))
    return rows


def benchmark(results: Path) -> Rendered:
    r = load_result(results, "benchmark.json")
    rows = [row for world in r.get("worlds") for row in _benchmark_rows(world, r)]
    return Rendered(("world", "protocol", "model [95% interval]", "repeat-last", "warp-last",
                     "DIAMOND-style peer", "engine"), rows, (r,))


def distill(results: Path) -> Rendered:
    r = load_result(results, "distill.json")
    rows = []
    for name in r.get("models"):
        def m(*keys, name=name):
            return r.get("models", name, *keys)

        decoder = m("decoder") + ("" if m("quantize") == "none" else f" {m('quantize')}")
        training = "-" if m("training_s") is None else f"{m('training_s') / 60:.2f} min"
        rows.append((name, m("sampling_steps"), decoder, num(m("next_chunk_psnr")),
                     num(m("rollout_psnr")), f"{m('rollout_psnr_vs_reference'):+.2f}",
                     num(m("ms_per_chunk")), f"{m('speedup_vs_reference'):.2f}x",
                     num(m("decode_ms")), pair(m("key_to_pixel_ms_no_twin", "p50"),
                                               m("key_to_pixel_ms_no_twin", "p95"), 0),
                     pair(m("key_to_pixel_ms", "p50"), m("key_to_pixel_ms", "p95"), 0),
                     num(m("fps_no_twin")), training))
    header = ("model", "sampling steps", "decoder", "next chunk (dB)", "32-frame rollout (dB)",
              f"vs {r.get('reference')} (dB)", "transformer ms / chunk", "speed-up",
              "decode ms", "key to pixel p50 / p95 (ms)", "the same with the engine twin",
              "frames/s without the twin", "training")
    return Rendered(header, rows, (r,))


def inference(results: Path) -> Rendered:
    r = load_result(results, "inference.json")
    keys = ("transformer_ms", "decode_ms", "chunk_ms", "speedup", "cpu_ms", "speedup_cpu",
            "warmup_s", "next_chunk_psnr", "psnr_loss_db")
    rows = [(name, *(num(r.get("rows", name, k)) for k in keys)) for name in r.get("rows")]
    header = ("switch", "transformer ms", "decode ms", "chunk ms", "speed-up", "CPU ms",
              "speed-up (CPU)", "warm-up s", "next chunk (dB)", "PSNR loss (dB)")
    return Rendered(header, rows, (r,))


def fast_decoder(results: Path) -> Rendered:
    r = load_result(results, "fast_decoder.json")
    keys = ("psnr", "ssim", "sharpness_ratio", "colour_distance", "decode_ms_per_chunk")
    rows = [(name, f"{r.get('parameters', name) / 1e6:.2f} M",
             *(num(r.get(name, k)) for k in keys)) for name in ("full", "fast")]
    header = ("decoder", "parameters", "PSNR (dB)", "SSIM", "sharpness", "colour distance",
              "decode ms / chunk")
    return Rendered(header, rows, (r,))


def memory(results: Path) -> Rendered:
    r = load_result(results, "memory.json")
    seeds = r.data.get("seeds", {})
    rows = []
    for name in r.get("variants"):
        if SEED_COPY.search(name):
            continue

        def v(key, name=name):
            return r.get("variants", name, key)

        ci = interval(v("return_psnr"), v("return_psnr_ci"))
        if name in seeds:
            pooled = seeds[name]
            ci = f"{mean_sd(pooled['return_psnr'])} ({pooled['seeds']} seeds; seed 0: {ci})"
        rows.append((name, ci, num(v("return_ssim")), num(v("self_consistency_psnr")),
                     num(v("all_frames_psnr")), num(v("memory_tokens_per_frame")),
                     num(v("growth_vs_first")), num(v("ms_vs_first"))))
    for name in r.get("references"):
        def ref(key, name=name):
            return r.get("references", name, key)

        rows.append((f"*{name}*", interval(ref("return_psnr"), ref("return_psnr_ci")),
                     num(ref("return_ssim")), num(ref("self_consistency_psnr")),
                     num(ref("all_frames_psnr")), "", "", ""))
    header = ("variant", "return PSNR (dB)", "return SSIM", "self-consistency (dB)",
              "all frames (dB)", "tokens / frame", "growth over none's",
              "ms / chunk over none's")
    return Rendered(header, rows, (r,))


def geometry(results: Path) -> Rendered:
    """Next chunk per map set: each world pooled over its seeds, paired with the reference
    (same seed) and with warp-last, then the baselines."""
    r = load_result(results, "geometry_world.json")
    ref, rows = r.get("reference"), []
    for block in ("training_maps", "heldout_map"):
        where = f"{block.replace('_', ' ')} ({r.get(block, 'walks')} walks)"
        for name, v in r.get(block, "variants").items():
            rows.append((where, name, interval(v["next_chunk_psnr"], v["next_chunk_psnr_ci"]),
                         ci(v.get(f"paired_vs_{ref}")), ci(v["vs_warp_last"]), v["seeds"]))
        for name, v in r.get(block, "baselines").items():
            rows.append((where, f"*{name.replace('_', '-')}*", ci(v), "", "", ""))
    header = ("walks", "world", "next chunk PSNR (dB)", f"minus {ref}, same seed (dB)",
              "minus warp-last (dB)", "seeds")
    return Rendered(header, rows, (r,))


def recall(results: Path, name: str = "geometry_recall.json") -> Rendered:
    """The recall protocol's table `name` (`table recall`) per engine block: each world
    pooled over its seeds and paired with the reference, then the references on the same
    frames."""
    r = load_result(results, name)
    ref, rows = r.get("reference"), []
    for block, b in r.get("engines").items():
        where = f"{block.replace('_', ' ')} ({b['walks']} walks, {b['recall_frames']} frames)"
        for name, v in b["variants"].items():
            rows.append((where, name, interval(v["recall_psnr"], v["recall_psnr_ci"]),
                         ci(v.get(f"paired_vs_{ref}")), num(v["memory_tokens_per_frame"], 1),
                         num(v["ms_per_chunk"], 0), v["seeds"]))
        for name, v in b["references"].items():
            rows.append((where, f"*{name.replace('_', '-')}*",
                         interval(v["recall_psnr"], v["recall_psnr_ci"]), "", "", "", ""))
    header = ("walks", "world", "recall PSNR (dB)", f"minus {ref}, same seed (dB)",
              "memory tokens / frame", "ms / chunk", "seeds")
    return Rendered(header, rows, (r,))


def long_horizon_random_walks(results: Path) -> Rendered:
    r = load_result(results, "long_horizon_random_walks.json")
    seeds = r.data.get("seeds", {})
    keys = ("psnr_drift_free_late", "psnr_repeat_late", "psnr_ae_late",
            "sharpness_ratio_vs_drift_free_late", "sharpness_ratio_vs_ae_late",
            "motion_ratio_vs_ae_late", "psnr_early")
    rows, late, early = [], None, None
    for name in r.get("methods"):
        if SEED_COPY.search(name):
            continue
        late, early = r.get("methods", name, "window_late"), r.get("methods", name,
                                                                   "window_early")
        pooled = seeds.get(name, {})

        def value(key, name=name, pooled=pooled):  # the seeds' mean where they were pooled
            return pooled[key]["mean"] if key in pooled else r.get("methods", name, key)

        psnr = (f"{mean_sd(pooled['psnr_late'])} ({pooled['seeds']} seeds)"
                if "psnr_late" in pooled else num(r.get("methods", name, "psnr_late")))
        rows.append((name, psnr, *(num(value(k)) for k in keys)))
    if late is None:
        raise ValueError("data/results/long_horizon_random_walks.json has no key 'methods' "
                         "with a method")
    header = ("method", f"PSNR, frames {late[0]}-{late[1]} (dB)", "drift-free (dB)",
              "repeat-last (dB)", "autoencoder (dB)", "sharpness / drift-free",
              "sharpness / autoencoder", "motion / autoencoder",
              f"PSNR, frames {early[0]}-{early[1]} (dB)")
    return Rendered(header, rows, (r,))


# the rows every loops block shares (the same frames): label, key in `psnr_<key>_late`
LOOP_REFERENCES = (("drift-free (the reference fed the engine's chunks: a next-chunk score)",
                    "drift_free"), ("autoencoder", "ae"), ("repeat-last", "repeat"),
                   ("warp-last", "warp"))


def long_horizon(results: Path) -> Rendered:
    """The long-horizon protocol on loop walks (`table loops`) per engine block: each method
    pooled over its training seeds and paired walk by walk with the reference on the late
    PSNR, then the references on the same frames."""
    r = load_result(results, "long_horizon.json")
    ref, rows, late = r.get("reference"), [], None
    for block, b in r.get("engines").items():
        late = b["late_window"]
        where = f"{block} ({b['walks']} walks, {b['loop_closure_frames']} loop-closure frames)"
        for name, m in b["methods"].items():
            rows.append((where, name, interval(m["psnr_late"], m["psnr_late_ci"]),
                         ci(m.get(f"paired_vs_{ref}")), num(m["loop_closure_psnr_late"]),
                         num(m["sharpness_ratio_vs_engine_late"]),
                         num(m["sharpness_ratio_vs_ae_late"]),
                         num(m["motion_ratio_vs_engine_late"]), m["seeds"]))
        for label, key in LOOP_REFERENCES:
            rows.append((where, f"*{label}*", num(b[f"psnr_{key}_late"]), "",
                         num(b.get(f"loop_closure_psnr_{key}_late")), "", "", "", ""))
    if late is None:
        raise ValueError("data/results/long_horizon.json has no key 'engines' with a block")
    header = ("walks", "method", f"late PSNR, frames {late[0]}-{late[1]} (dB)",
              f"minus {ref}, same seed (dB)", "loop-closure PSNR (dB)", "sharpness / engine",
              "sharpness / autoencoder", "motion / engine", "seeds")
    return Rendered(header, rows, (r,))


def long_horizon_bars(results: Path) -> Rendered:
    """The long-horizon issue's bars (`loop_table.LOOP_BARS`) on each block's best method
    (chosen on validation walks), and whether each is met."""
    from ..evaluate.loop_table import LOOP_BARS  # here: it imports the engines and models

    r = load_result(results, "long_horizon.json")
    blocks = r.get("engines")
    header = ("bar", "needs", *(f"{n} (best: {b['best']['name']})" for n, b in blocks.items()))
    return Rendered(header, bars_met(LOOP_BARS, blocks), (r,))


def autoencoders(results: Path) -> Rendered:
    r = load_result(results, "autoencoders.json")
    rows = []
    for name in r.get("rows"):
        def a(*keys, name=name):
            return r.get("rows", name, *keys)

        rows.append((name, f"{a('downsample')}x", pair(a("psnr"), a("ssim")),
                     num(a("sharpness_ratio")), num(a("colour_distance")),
                     pair(a("heldout_map", "psnr"), a("heldout_map", "ssim")),
                     num(a("heldout_map", "sharpness_ratio"))))
    header = ("autoencoder", "compression", "random starts MAP01-03: PSNR (dB) / SSIM",
              "sharpness", "colour distance", "held-out MAP04: PSNR (dB) / SSIM", "sharpness")
    return Rendered(header, rows, (r,))


def browser_play(results: Path) -> Rendered:
    """Idle first (the machine play is meant for), then busy when that file is shipped."""
    names = ["browser_play_idle.json"]
    if (Path(results) / "browser_play_busy.json").is_file():
        names.append("browser_play_busy.json")
    sources = tuple(load_result(results, n) for n in names)
    rows = []
    for r in sources:
        def walk(part, r=r):
            after = r.get(part, "last_frame_after_last_press_ms") / 1000
            return (f"{r.get(part, 'presses')} presses {r.get(part, 'gap_ms')} ms apart: "
                    f"{r.get(part, 'frames_played')} frames played, the last {after:.2f} s "
                    f"after the last press")

        k, kernel = r.get("key_to_frame_ms"), r.get("kernel_key_to_frame_ms")
        load = r.get("load_average_start")[0]
        rows.append((f"{r.get('machine_state')}; load average {num(load)} on "
                     f"{r.get('cpus')} cores", f"{k['median']} ms ({k['min']}-{k['max']})",
                     f"{kernel['median']} ms", walk("burst"), walk("held")))
    header = ("machine", "key to frame, median (min-max)", "the kernel's own share, median",
              "burst", "held key")
    return Rendered(header, rows, sources)


TABLES: dict[str, Callable[[Path], Rendered]] = {
    "index": index,
    "worlds": worlds,
    "worlds_bars": worlds_bars,
    "benchmark": benchmark,
    "distill": distill,
    "inference": inference,
    "fast_decoder": fast_decoder,
    "memory": memory,
    "geometry": geometry,
    "geometry_recall": recall,
    "memory_recall": partial(recall, name="memory_recall.json"),
    "long_horizon": long_horizon,
    "long_horizon_bars": long_horizon_bars,
    "long_horizon_random_walks": long_horizon_random_walks,
    "autoencoders": autoencoders,
    "browser_play": browser_play,
}


# ----------------------------------------------------------------------------------------
# Markdown and documents
# ----------------------------------------------------------------------------------------


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(t: Rendered, document: Path, results: Path) -> list[str]:
    """The lines between a table's markers: the table, a blank line, where it came from
    (links relative to `document`)."""
    lines = ["| " + " | ".join(map(_cell, t.header)) + " |",
             "|" + "---|" * len(t.header)]
    lines += ["| " + " | ".join(map(_cell, row)) + " |" for row in t.rows]
    if not t.sources:
        made = ("One row per `data/results/*.json`; re-made with `python -m worldlab results "
                "render`.")
    else:
        parts = []
        for r in t.sources:
            link = Path(os.path.relpath(Path(results) / r.name, Path(document).parent))
            made_by = " and ".join(f"`{_cell(c)}`" for c in r.made_by())
            parts.append(f"[`{link.as_posix()}`]({link.as_posix()}), made by {made_by}")
        made = "From " + "; ".join(parts) + "."
    return [*lines, "", made]


@dataclass(frozen=True)
class Block:
    """One marked table of a document: its name and the 0-based lines of its markers."""

    name: str
    open: int
    close: int


def find_blocks(document: Path, lines: list[str]) -> list[Block]:
    blocks, current = [], None
    for i, line in enumerate(lines):
        if m := OPEN.match(line):
            if current is not None:
                raise ValueError(f"{document}:{i + 1}: marker results:{m['name']} opens inside "
                                 f"results:{current[0]} (opened at line {current[1] + 1})")
            if m["name"] not in TABLES:
                raise ValueError(f"{document}:{i + 1}: unknown table marker "
                                 f"'results:{m['name']}'; the tables are {sorted(TABLES)}")
            current = (m["name"], i)
        elif m := CLOSE.match(line):
            if current is None or m["name"] != current[0]:
                raise ValueError(f"{document}:{i + 1}: marker /results:{m['name']} closes no "
                                 f"open results:{m['name']}")
            blocks.append(Block(current[0], current[1], i))
            current = None
    if current is not None:
        raise ValueError(f"{document}:{current[1] + 1}: marker results:{current[0]} is never "
                         f"closed (expected a line <!-- /results:{current[0]} -->)")
    return blocks


@dataclass(frozen=True)
class Stale:
    """A table whose rendering differs from its document's text."""

    document: Path
    table: str
    line: int  # 1-based, in the document
    expected: str
    found: str

    def __str__(self) -> str:
        return (f"{self.document}:{self.line}: table {self.table!r} is out of date\n"
                f"  rendered: {self.expected}\n  document: {self.found}")


def render_text(document: Path, text: str, results: Path) -> tuple[str, list[Stale]]:
    """`text` with every marked table rendered, and the tables that differed."""
    lines = text.split("\n")
    blocks = find_blocks(document, lines)
    out, stale, start, cache = [], [], 0, {}
    for b in blocks:
        if b.name not in cache:
            cache[b.name] = TABLES[b.name](results)
        new = to_markdown(cache[b.name], document, results)
        old = lines[b.open + 1:b.close]
        if new != old:
            at = next((i for i, (n, o) in enumerate(zip(new, old)) if n != o),
                      min(len(new), len(old)))
            stale.append(Stale(document, b.name, b.open + 2 + at,
                               new[at] if at < len(new) else "(nothing: the table ends)",
                               old[at] if at < len(old) else "(nothing: the table ends)"))
        out += lines[start:b.open + 1] + new
        start = b.close
    out += lines[start:]
    return "\n".join(out), stale


def documents(root: Path) -> list[Path]:
    return [Path(root) / d for d in DOCUMENTS]


def check(root: Path = ROOT) -> list[Stale]:
    """Every table of the documents under `root` whose rendering differs from the text."""
    results = Path(root) / RESULTS
    return [s for doc in documents(root)
            for s in render_text(doc, doc.read_text(), results)[1]]


def render(root: Path = ROOT) -> list[Stale]:
    """Rewrite the documents' marked tables (atomically, a document only when it changed);
    returns the tables that changed."""
    results, changed = Path(root) / RESULTS, []
    for doc in documents(root):
        text, stale = render_text(doc, doc.read_text(), results)
        if stale:
            atomic_write_text(doc, text)
        changed += stale
    return changed


# ----------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------


def _cmd_render(args) -> int:
    changed = render(Path(args.root))
    for s in changed:
        print(f"rendered {s.document}: {s.table}")
    print(f"{len(changed)} table(s) changed in {', '.join(DOCUMENTS)}")
    return 0


def _cmd_check(args) -> int:
    stale = check(Path(args.root))
    for s in stale:
        print(s)
    if stale:
        print(f"{len(stale)} table(s) out of date: run `python -m worldlab results render`")
        return 1
    print(f"every marked table in {', '.join(DOCUMENTS)} matches data/results/")
    return 0


def _cmd_list(args) -> int:
    t = index(Path(args.root) / RESULTS)
    widths = [max(len(str(x)) for x in col) for col in zip(t.header, *t.rows)]
    for row in [t.header, *t.rows]:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip())
    return 0


def configure_cli(parser) -> None:
    """The `results` command."""
    sub = parser.add_subparsers(dest="action", metavar="action")
    for name, func, help_ in (
            ("render", _cmd_render, "rewrite every marked table in the documents"),
            ("check", _cmd_check, "exit 1 naming each table that differs from its rendering"),
            ("list", _cmd_list, "the index of data/results/*.json")):
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--root", default=str(ROOT),
                       help="repository root holding README.md, data/README.md and "
                            "data/results/ (default: this checkout)")
        p.set_defaults(func=func)
