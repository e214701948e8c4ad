"""A training run's logged scalars read back from its TensorBoard events (`loop.fit` writes
them under `<run>/tensorboard`), as one curve per scalar even across resumes: the steps a
crashed try logged past its last checkpoint are purged, as TensorBoard shows them.

    gates = gate_curves("runs/recall/runs/retrieval")   # {"memory_gate_norm": [[1, 0.0], ...]}
"""

from __future__ import annotations

import logging
from pathlib import Path

from .loop import TENSORBOARD_DIR

GATE_SUFFIX = "_gate_norm"  # WorldModel.memory_gates' keys, logged as train/<key>


def scalars(run) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} of every scalar the run at `run` logged; an error names a
    run without events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logs = Path(run) / TENSORBOARD_DIR
    if not any(logs.glob("events.out.tfevents.*")):
        raise FileNotFoundError(f"{logs}: no TensorBoard events (expected a training run's "
                                f"directory, trained with train.tensorboard on)")
    quiet = logging.getLogger("tensorboard")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # a resume's purge is expected here: not a warning
    try:
        acc = EventAccumulator(str(logs))
        acc.Reload()
    finally:
        quiet.setLevel(level)
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


def gate_curves(run, every: int = 10) -> dict[str, list[list]]:
    """{gate: [[step, norm], ...]} of the memory gates the run logged (its first step, every
    `every`-th step and its last), rounded to 5 digits; {} for a run without memory."""
    if every < 1:
        raise ValueError(f"every must be a positive number of steps, got {every}")
    curves = {}
    for tag, points in scalars(run).items():
        key = tag.rpartition("/")[2]
        if key.endswith(GATE_SUFFIX) and points:
            kept = [p for i, p in enumerate(points)
                    if i == 0 or p[0] % every == 0 or i == len(points) - 1]
            curves[key] = [[step, round(float(v), 5)] for step, v in kept]
    return curves
