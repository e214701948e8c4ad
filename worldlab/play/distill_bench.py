"""A teacher and its few-step students side by side, in one run (`python -m worldlab bench
distill`): quality on the quick suite's protocols, speed per chunk, and play (it sits in
`play/` because it plays each model).

Each model is a world directory sampled with some number of steps and a decoder:

    teacher_16   the world as shipped: 16 Euler steps
    teacher_32   the same weights with 32 steps (is 16 enough?)
    teacher_4    the same weights with 4 steps, no distillation: what a student must beat
    student_4_<recipe>, student_1    worlds made by `train distill`

Quality: next-chunk PSNR (teacher forced) and open-loop rollout PSNR over `horizon` frames
against the engine, on the same held-out episodes for every model. Speed: transformer and
decode milliseconds per chunk (one chunk of every model in turn, after its window fills:
`switches.stream_side_by_side`),
key-to-pixel p50 / p95 with the engine twin and without it, and frames/s without it
(`bench play`). Training time comes from a student's `distill_run.json`.
"""

from __future__ import annotations

import torch

from ..evaluate.protocols import drift, heldout_episodes, next_chunk
from ..evaluate.switches import stream_side_by_side
from ..evaluate.report import print_table
from ..loading import read_json
from ..pretrained import DEFAULT_WORLD, load_world, resolve_checkpoint
from .script import bench_play

SPEC_FIELDS = ("steps", "decoder", "quantize")


def parse_model(spec: str) -> tuple[str, dict]:
    """"name=DIR[,steps=N][,decoder=fast][,quantize=int8]" -> (name, {"path", "steps",
    "decoder", "quantize"})."""
    name, sep, rest = spec.partition("=")
    if not sep or not name.strip() or not rest:
        raise ValueError(f"a model is NAME=DIR[,steps=N][,decoder=full|fast]"
                         f"[,quantize=int8], got {spec!r}")
    path, *options = rest.split(",")
    model = {"path": path, "steps": None, "decoder": None, "quantize": None}
    for option in options:
        key, _, value = option.partition("=")
        if key not in SPEC_FIELDS or not value:
            raise ValueError(f"model {name!r}: unknown option {option!r}; expected "
                             f"steps=N, decoder=full|fast or quantize=int8")
        if key == "steps" and not (value.isdigit() and int(value) > 0):
            raise ValueError(f"model {name!r}: steps must be a positive int, got {value!r}")
        model[key] = int(value) if key == "steps" else value
    return name.strip(), model


def world_options(model: dict) -> dict:
    """`load_world` keywords for a parsed model: its options as sample overrides."""
    sample = {k: model[k] for k in SPEC_FIELDS if model[k] is not None}
    return {"sample": sample} if sample else {}


def default_models(teacher=None) -> list[str]:
    t = str(teacher or DEFAULT_WORLD)
    return [f"teacher_16={t},steps=16", f"teacher_32={t},steps=32", f"teacher_4={t},steps=4"]


def measure_model(model: dict, episodes, horizon: int, play_steps: int) -> dict:
    """Quality, speed and play of one model (see the module docstring)."""
    path = resolve_checkpoint(model["path"])
    options = world_options(model)
    world = load_world(path, **options)
    quality = {**next_chunk(world, episodes), **drift(world, episodes, horizon)}
    twin = bench_play(path, play_steps, twin=True, world_options=options)
    alone = bench_play(path, play_steps, twin=False, world_options=options)
    run = path / "distill_run.json"
    trained = read_json(run, "distillation record") if run.exists() else None
    return {"path": str(model["path"]), "sampling_steps": world.config.sample.steps,
            "decoder": world.config.sample.decoder, "quantize": world.config.sample.quantize,
            "distill": world.config.distill.recipe,
            "next_chunk_psnr": quality["next_chunk_psnr"],
            "rollout_psnr": quality["rollout_psnr_mean"],
            "rollout_psnr_curve": quality["rollout_psnr"],
            "baseline_repeat_psnr": quality["baseline_repeat_psnr"],
            "key_to_pixel_ms": {"p50": twin["key_to_pixel_ms_p50"],
                                "p95": twin["key_to_pixel_ms_p95"]},
            "key_to_pixel_ms_no_twin": {"p50": alone["key_to_pixel_ms_p50"],
                                        "p95": alone["key_to_pixel_ms_p95"]},
            "fps_no_twin": alone["fps"], "fps_with_twin": twin["fps"],
            "training_s": None if trained is None else
            sum(trained["seconds"].values()), "training": trained}


def bench_distill(model: list[str] | None = None, checkpoint=None, episodes: int | None = None,
                  horizon: int = 32, steps: int = 200, reference: str = "teacher_16") -> dict:
    """Every model of `model` ("name=DIR[,steps=N][,decoder=fast]"; default: the world
    `checkpoint` at 16, 32 and 4 steps) on the same `episodes` held-out episodes (default 8)
    in one run, with `steps` steps of play each; prints the table. Speed-ups are against
    `reference`, measured in the same run."""
    models, play_steps, episodes = model, steps, episodes or 8
    specs = dict(parse_model(m) for m in (models or default_models(checkpoint)))
    first = load_world(resolve_checkpoint(next(iter(specs.values()))["path"]))
    f = first.chunk_frames
    eps = heldout_episodes(first.config.data.engine, episodes, f * (1 + horizon // f) + f,
                           first.size)
    result = {name: measure_model(m, eps, horizon, play_steps) for name, m in specs.items()}
    worlds = {name: load_world(resolve_checkpoint(m["path"]), **world_options(m))
              for name, m in specs.items()}
    for name, speed in stream_side_by_side(worlds, chunks=40).items():
        result[name].update(ms_per_chunk=speed["transformer_ms"], decode_ms=speed["decode_ms"])
    ref = result.get(reference)
    for r in result.values():
        if ref is not None:
            r["speedup_vs_reference"] = ref["ms_per_chunk"] / r["ms_per_chunk"]
            r["rollout_psnr_vs_reference"] = r["rollout_psnr"] - ref["rollout_psnr"]
    print_table([{"model": name, **{k: round(v, 2) for k, v in r.items()
                                    if isinstance(v, float)},
                  "k2p_p50": round(r["key_to_pixel_ms"]["p50"], 1),
                  "k2p_p95": round(r["key_to_pixel_ms"]["p95"], 1)}
                 for name, r in result.items()],
                "teacher and students (quality against the engine; ms per 4-frame chunk)")
    return {"models": result, "reference": reference,
            "episodes": {"count": episodes, "frames": len(eps[0]), "horizon": horizon},
            "play_steps": play_steps, "threads": torch.get_num_threads()}


def summary(result: dict) -> list[dict]:
    """Rows for a plot of quality against speed: name, ms_per_chunk, rollout_psnr."""
    return [{"model": name, "ms_per_chunk": r["ms_per_chunk"],
             "rollout_psnr": r["rollout_psnr"], "next_chunk_psnr": r["next_chunk_psnr"],
             "total_ms": r["ms_per_chunk"] + r["decode_ms"]}
            for name, r in sorted(result["models"].items(),
                                  key=lambda kv: kv[1]["ms_per_chunk"])]
