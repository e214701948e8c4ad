"""The seam every protocol of the full suite plugs into.

A protocol is one module that builds a `Protocol`: its name (`eval --suite NAME`, the key of
its seconds), a title (the progress bar), the result keys it writes, how it runs on a
`SuiteRun` (the world, every model, the probes, the sizes, the engine and the sections of
the protocols before it), its headline rows and its plotly figures. `evaluate.registry`
lists them; the suite, the CLI's choices, the progress bar and the report iterate over that
list, so adding a protocol is its module and one line there.

    Protocol("runtime", "runtime", ("runtime",), run=_run, rows=_rows)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from ...pretrained import World
from ..stats import fmt
from ..protocols import HELDOUT_SEED

Row = tuple[str, str, dict]  # (section, metric, {column: value, interval or text})
COLUMNS = ("world", "peer", "repeat", "engine")  # the table's columns: models, then the
# engine's own frames where they have a score (the probes read them too)


@dataclass(frozen=True)
class SuiteSizes:
    """How much of each protocol runs (the defaults: the shipped table, ~15 min on 2
    cores for the 64 px world)."""

    episodes: int = 8  # next chunk, drift, camera, generalisation walks
    horizon: int = 32  # open-loop frames
    starts: int = 4  # next-chunk starts per walk
    runtime_chunks: int = 50
    revisit_walks: int = 8
    revisit_frames: int = 96
    cost_chunks: int = 50  # revisit: chunks streamed to time the world with memory
    long_walks: int = 2
    long_frames: int = 600
    event_walks: int = 24
    seed: int = HELDOUT_SEED

    def __post_init__(self):
        for name, v in asdict(self).items():
            if not isinstance(v, int) or v < (0 if name == "cost_chunks" else 1):
                raise ValueError(f"suite size {name} must be a positive integer, got {v!r}")


SIZES = SuiteSizes()


def suite_sizes(specs: list[str]) -> SuiteSizes:
    """`SIZES` with "KEY=N" overrides (the CLI's --full-size); a bad key or value names
    itself and the keys there are."""
    fields = asdict(SIZES)
    over = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or key.strip() not in fields or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"a suite size is KEY=N with KEY one of {sorted(fields)}, got "
                             f"{spec!r}")
        over[key.strip()] = int(value)
    return SuiteSizes(**{**fields, **over})


@dataclass
class SuiteRun:
    """What a protocol runs on. `models`: {"world": WorldPredictor, "peer" when given,
    "repeat": RepeatPredictor}; `probes`: `train.probes.Probes` or None (the protocols that
    need them say "skipped"); `result`: the sections written so far (runtime reads the
    frames/s of drift's rollouts when drift ran before it)."""

    world: World
    models: dict
    probes: object | None
    sizes: SuiteSizes
    engine: str
    result: dict


def no_figures(result: dict) -> list:
    return []


@dataclass(frozen=True)
class Protocol:
    """One protocol of the full suite. `run(suite_run) -> (sections, strips)`: `sections`
    holds exactly `keys` and goes into the result JSON; `strips` ({where: {row: uint8
    (s, h, w, 3)}}) go to the report only. `rows(result)` and `figures(result)` read the
    whole result (a row may need the probes' report beside its own section)."""

    name: str
    title: str
    keys: tuple[str, ...]
    run: Callable[[SuiteRun], tuple[dict, dict]]
    rows: Callable[[dict], list[Row]]
    figures: Callable[[dict], list] = no_figures

    def __post_init__(self):
        if not self.name.isidentifier() or not self.keys:
            raise ValueError(f"a protocol needs an identifier for a name and the result keys "
                             f"it writes, got name {self.name!r}, keys {self.keys!r}")


# ----------------------------------------------------------------------------------------
# Cells of the headline table
# ----------------------------------------------------------------------------------------


def is_interval(v) -> bool:
    return isinstance(v, dict) and "mean" in v


def cell(v, digits: int = 2) -> str:
    """A table cell: an interval as 'mean [lo, hi]', a float to `digits`, None as '-'."""
    if is_interval(v):
        return fmt(v, digits)
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)
