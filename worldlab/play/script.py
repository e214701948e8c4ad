"""Scripted play, a shell of `WorldSession`: action files, `python -m worldlab play`,
videos, and the `bench play` benchmark.

    python -m worldlab play --checkpoint data/checkpoints/doom64 --script actions.json \
        --out runs/play/ [--engine doom --seed 0 --policy hold --no-paint]

An action file is a JSON list with one entry per step:
    {"forward": 0.25, "right": 0, "yaw": 10, "pitch": 0, "buttons": ["attack"],
     "prompt": "summon a monster"}   # every key optional; "prompt" switches the event
It writes `generated.mp4` (the world model), `side_by_side.mp4` (model | engine twin, each
named in a bar over it) and `scores.json` (PSNR per step against the twin, with repeat-last
and warp-last beside it, timings). A world that ships a depth head paints what it has seen
unless `--no-paint`. `demo_script(steps)` makes an action list.

Shape legend: t steps, h w height/width.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from ..atomic import atomic_write_json
from ..camera import Action
from ..engines.policies import WALK
from ..evaluate.baselines import repeat_baseline, warp_to_poses
from ..evaluate.report import print_table
from ..metrics import frame_psnr
from ..model.textenc import check_prompt
from ..loading import read_json
from ..pretrained import DEPTH_HEAD, PAINT, load_world, resolve_checkpoint
from .session import DEMO_PROMPT, LATENCY_POLICIES, WorldSession, check_action, rss_mb

SCRIPT_KEYS = ("forward", "right", "yaw", "pitch", "buttons", "prompt")
VIDEO_SIDE = 256  # frames are enlarged (nearest) to about this many pixels high
LABEL_PX = 16  # height of the bar that names the screens of a labelled video
VIDEO_LABELS = ("model", "engine twin")  # side_by_side.mp4, left to right

# ----------------------------------------------------------------------------------------
# Action scripts
# ----------------------------------------------------------------------------------------


def demo_script(steps: int, prompt_at: int | None = None,
                prompt: str = DEMO_PROMPT) -> list[dict]:
    """A scripted walk of `steps` entries (engines.policies.WALK repeated), sending `prompt`
    (default DEMO_PROMPT, which summons a monster in both engines) at step `prompt_at`
    (default: halfway)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    prompt_at = steps // 2 if prompt_at is None else prompt_at
    if not (isinstance(prompt_at, int) and 0 <= prompt_at < steps):
        raise ValueError(f"prompt_at must be an int in [0, {steps}), got {prompt_at!r}")
    script = [WALK[k % len(WALK)].to_dict() for k in range(steps)]
    script[prompt_at]["prompt"] = check_prompt(prompt, "prompt")
    return script


def parse_script(entries, where: str = "script") -> list[tuple[Action, str | None]]:
    """Validate a list of action dicts; an error names the entry index and the field."""
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{where} must be a non-empty JSON list of action objects, got "
                         f"{type(entries).__name__}")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"{where}[{i}] must be an object with keys {SCRIPT_KEYS}, got "
                             f"{entry!r}")
        unknown = sorted(set(entry) - set(SCRIPT_KEYS))
        if unknown:
            raise ValueError(f"{where}[{i}] has unknown field {unknown[0]!r}; expected "
                             f"{SCRIPT_KEYS}")
        fields = {k: v for k, v in entry.items() if k != "prompt"}
        prompt = entry.get("prompt")
        try:
            action = check_action(fields)
            if prompt is not None:
                check_prompt(prompt, "prompt")
        except ValueError as e:
            raise ValueError(f"{where}[{i}]: {e}") from None
        out.append((action, prompt))
    return out


def load_script(path) -> list[tuple[Action, str | None]]:
    """An action file -> parsed steps; every error (unreadable, not UTF-8, not JSON, a bad
    entry) is a ValueError naming the file."""
    return parse_script(read_json(Path(path), "action script"), str(path))


def play_script(session: WorldSession, script, callback=None) -> list:
    """Step `session` through parsed (action, prompt) pairs; callback(i, result) per step."""
    results = []
    for i, (action, prompt) in enumerate(script):
        results.append(session.step(action, prompt))
        if callback is not None:
            callback(i, results[-1])
    return results


# ----------------------------------------------------------------------------------------
# Videos and scores
# ----------------------------------------------------------------------------------------


def label_bar(width: int, labels: dict[int, str]) -> np.ndarray:
    """(LABEL_PX, width, 3) uint8: a black bar with each text in white from its column."""
    from PIL import Image, ImageDraw

    for x, text in labels.items():
        if not (isinstance(x, int) and 0 <= x < width and isinstance(text, str)):
            raise ValueError(f"labels must map a column in [0, {width}) to a str, got "
                             f"{x!r}: {text!r}")
    bar = Image.new("RGB", (width, LABEL_PX))
    draw = ImageDraw.Draw(bar)
    for x, text in labels.items():
        draw.text((x + 4, 2), text, fill=(255, 255, 255))
    return np.asarray(bar)


def write_mp4(path, frames: np.ndarray, fps: float, labels: dict[int, str] | None = None
              ) -> Path:
    """uint8 frames (t, h, w, 3) -> H.264 mp4, enlarged with nearest pixels; atomic.
    `labels` (frame column -> text) are written in a bar over the frames, so a viewer
    knows which screen is which."""
    import imageio.v3 as iio

    path = Path(path)
    frames = np.asarray(frames)
    scale = max(1, VIDEO_SIDE // frames.shape[1])  # by height: side by side stays as large
    big = frames.repeat(scale, axis=1).repeat(scale, axis=2)  # (t, h s, w s, 3)
    if labels:
        bar = label_bar(big.shape[2], {x * scale: t for x, t in labels.items()})
        big = np.concatenate([np.broadcast_to(bar, (len(big), *bar.shape)), big], axis=1)
    # yuv420p needs even sides: pad one white row / column where they are odd
    big = np.pad(big, ((0, 0), (0, big.shape[1] % 2), (0, big.shape[2] % 2), (0, 0)),
                 constant_values=255)
    tmp = path.with_name(f".tmp-{path.name}")  # keeps the .mp4 suffix for ffmpeg
    try:
        # imageio-ffmpeg (libx264, yuv420p); macro_block_size=1: never resize the frames
        iio.imwrite(tmp, big, extension=".mp4", plugin="FFMPEG", fps=fps, macro_block_size=1)
        if tmp.stat().st_size == 0:  # ffmpeg can fail without raising
            raise RuntimeError(f"ffmpeg wrote nothing for {path} (frames {big.shape})")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def scores(results) -> dict:
    """PSNR per step against the twin (None where there is none) and its mean."""
    per_step = [r.stats["psnr"] for r in results]
    known = [p for p in per_step if p is not None]
    return {"psnr": per_step, "psnr_mean": float(np.mean(known)) if known else None}


def baseline_psnr(session: WorldSession, results) -> dict[str, list[float]]:
    """PSNR per step against the engine twin of the two trivial baselines, on a session's
    own run: `results` are its steps since reset, in order. "repeat last frame" shows the
    last context frame at every step; "warp last frame" forward-warps it with its depth
    into each step's pose (the engine's, the known camera motion; holes keep its colour).
    A session keeps no depth and an engine cannot be rewound, so the context frame's depth
    comes from opening the engine again at its first chunk (same seed: the same frame)."""
    if not session.started or session.engine_name is None or not results or \
            any(r.twin_frame is None for r in results):
        raise ValueError("baseline_psnr needs a session reset from an engine with its twin, "
                         "and that session's steps")
    if [r.step for r in results] != list(range(1, len(results) + 1)):
        raise ValueError(f"results must be the steps since reset in order (1, 2, ...), got "
                         f"steps {[r.step for r in results][:5]}...")
    obs = session.first_chunk()
    last, truth = obs[-1], np.stack([r.twin_frame for r in results])  # (t, h, w, 3)
    poses = np.stack([r.c2w for r in results])  # (t, 4, 4) the twin's poses
    warp = warp_to_poses(last.rgb, last.depth, last.c2w, last.K, poses)
    return {"repeat last frame": frame_psnr(repeat_baseline(last.rgb, len(results)),
                                            truth).tolist(),
            "warp last frame": frame_psnr(warp, truth).tolist()}


# scores.json's key for each curve of `baseline_psnr`
BASELINE_KEYS = {"repeat last frame": "baseline_repeat_psnr",
                 "warp last frame": "baseline_warp_psnr"}


def write_outputs(out: Path, first, results, fps: float,
                  baselines: dict[str, list[float]] | None = None) -> dict:
    """generated.mp4, side_by_side.mp4 (when there is a twin) and scores.json under `out`;
    `baselines` (`baseline_psnr` of the same steps) go into scores.json per step beside the
    model's PSNR, as baseline_repeat_psnr and baseline_warp_psnr."""
    baselines = baselines or {}
    unknown = set(baselines) - set(BASELINE_KEYS)
    if unknown or any(len(c) != len(results) for c in baselines.values()):
        raise ValueError(f"baselines must be baseline_psnr's curves {sorted(BASELINE_KEYS)}, "
                         f"one value per step ({len(results)}), got {sorted(baselines)} "
                         f"with {[len(c) for c in baselines.values()]} values")
    out.mkdir(parents=True, exist_ok=True)
    frames = np.stack([first.frame] + [r.frame for r in results])  # (t + 1, h, w, 3)
    written = {"generated": str(write_mp4(out / "generated.mp4", frames, fps))}
    if first.twin_frame is not None:
        twins = np.stack([first.twin_frame] + [r.twin_frame for r in results])
        gap = np.full((*frames.shape[:2], 2, 3), 255, np.uint8)  # (t + 1, h, 2, 3)
        both = np.concatenate([frames, gap, twins], axis=2)
        columns = (0, frames.shape[2] + gap.shape[2])  # where each screen starts
        written["side_by_side"] = str(write_mp4(out / "side_by_side.mp4", both, fps,
                                                dict(zip(columns, VIDEO_LABELS))))
    data = {**scores(results), **{BASELINE_KEYS[k]: list(c) for k, c in baselines.items()},
            "steps": len(results),
            "chunk_latency_ms": [r.stats["chunk_latency_ms"] for r in results
                                 if r.stats["key_to_pixel_ms"] is not None],
            "files": written}
    atomic_write_json(out / "scores.json", data)
    return data


# ----------------------------------------------------------------------------------------
# Command line: python -m worldlab play
# ----------------------------------------------------------------------------------------


def can_paint(path) -> bool:
    """Whether the world at `path` ships a depth head, so that its own 3D cache can paint
    what it has seen (`play`'s default)."""
    return (resolve_checkpoint(path) / DEPTH_HEAD).is_dir()


def _cmd_play(args) -> int:
    from tqdm.auto import tqdm

    script = load_script(args.script)  # validated before anything is loaded or written
    paint = can_paint(args.checkpoint) if args.paint is None else args.paint
    session = WorldSession.from_pretrained(args.checkpoint, args.device, args.sample_steps,
                                           twin=not args.no_twin, policy=args.policy,
                                           paint=paint)
    try:
        first = session.reset(engine=args.engine or session.trained_engine, seed=args.seed)
        with tqdm(total=len(script), desc="play") as bar:
            results = play_script(session, script, lambda i, r: bar.update(1))
        fps = session.frame_rate()
        baselines = baseline_psnr(session, results) if session.has_twin and results else None
    finally:
        session.close()
    data = write_outputs(Path(args.out), first, results, fps, baselines)
    print(f"{len(results)} steps; mean PSNR vs twin {data['psnr_mean']}; wrote "
          f"{', '.join(data['files'].values())} and {Path(args.out) / 'scores.json'}")
    return 0


def configure_cli(parser) -> None:
    parser.add_argument("--checkpoint", default=None,
                        help="world directory (default: the shipped data/checkpoints/doom64)")
    parser.add_argument("--script", required=True, help="actions.json: a list of steps")
    parser.add_argument("--out", default="runs/play", help="output directory")
    parser.add_argument("--engine", default=None,
                        help="engine for the first chunk and the twin (default: the world's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--policy", choices=LATENCY_POLICIES, default="hold",
                        help="hold: a chunk's first action drives it; buffer: every "
                             "action counts, frames lag a chunk")
    parser.add_argument("--sample-steps", type=int, default=None,
                        help="sampling steps per chunk (default: the world's config)")
    parser.add_argument("--no-twin", action="store_true", help="no ground-truth engine twin")
    parser.add_argument("--paint", action=argparse.BooleanOptionalAction, default=None,
                        help="the world's own 3D cache paints what it has seen (default: "
                             "when the world ships a depth head, as both defaults do)")
    parser.set_defaults(func=_cmd_play)


# ----------------------------------------------------------------------------------------
# Benchmark: python -m worldlab bench play --checkpoint DIR --steps 2000
# ----------------------------------------------------------------------------------------


def bench_play(checkpoint=None, steps: int = 300, twin: bool = True,
               world_options: dict | None = None, paint: bool = False) -> dict:
    """A `steps`-step session (with the engine twin unless `twin=False`): speed, what
    dominates, memory over time. `world_options` go to `load_world` (e.g. sample
    overrides: sampling steps, a decoder, an inference switch); `paint`: with the world's
    own 3D cache painting what it has seen, as `play` plays a world with a depth head."""
    script = parse_script(demo_script(steps))
    rss_start, t0 = rss_mb(), time.perf_counter()
    options = dict(world_options or {})
    for section, fields in (PAINT if paint else {}).items():
        options[section] = {**options.get(section, {}), **fields}
    world = load_world(resolve_checkpoint(checkpoint), **options)
    session = WorldSession(world, twin=twin)
    load_s = time.perf_counter() - t0
    stats, t_first = [], None  # stats only: keeping the frames would inflate rss_mb_end
    try:
        session.reset(engine=session.trained_engine, seed=0)
        t_loop = time.perf_counter()
        for action, prompt in script:
            stats.append(session.step(action, prompt).stats)
            t_first = t_first or time.perf_counter()
        elapsed = time.perf_counter() - t_loop
    finally:
        session.close()
    chunks = [s for s in stats if s["key_to_pixel_ms"] is not None]  # chunk-making steps
    psnr = [s["psnr"] for s in stats if s["psnr"] is not None]  # none without the twin
    mean = lambda k: float(np.mean([c[k] for c in chunks]))  # noqa: E731
    data = {"steps": steps, "fps": steps / elapsed, "time_to_first_frame_s": t_first - t0,
            "load_s": load_s, "rss_mb_start": rss_start, "rss_mb_end": rss_mb(),
            "rss_mb_after_first_chunk": stats[0]["rss_mb"],
            "cache_chunks_end": stats[-1]["cache_chunks"],
            "chunk_latency_ms": mean("chunk_latency_ms"),
            "chunk_latency_ms_p95": float(np.percentile([c["chunk_latency_ms"]
                                                         for c in chunks], 95)),
            "key_to_pixel_ms": mean("key_to_pixel_ms"),
            "key_to_pixel_ms_p50": float(np.median([c["key_to_pixel_ms"] for c in chunks])),
            "key_to_pixel_ms_p95": float(np.percentile([c["key_to_pixel_ms"]
                                                        for c in chunks], 95)),
            "twin": twin, "paint": paint,
            "breakdown_ms_per_chunk": {k: mean(f"{k}_ms") for k in
                                       ("transformer", "decode", "memory", "engine", "text")},
            "psnr_mean": float(np.mean(psnr)) if psnr else None,
            "policy": session.policy,
            "chunk_frames": session.chunk_frames, "sampling_steps": session.steps,
            "checkpoint": str(session.world.path), "device": str(session.world.device)}
    print_table([{k: v for k, v in data.items() if isinstance(v, (int, float))}],
                f"play (one session, {'with' if twin else 'without'} the engine twin"
                f"{', painting' if paint else ''})")
    print_table([data["breakdown_ms_per_chunk"]], "ms per chunk")
    return data
