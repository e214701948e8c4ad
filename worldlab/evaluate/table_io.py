"""What every `table` sub-command shares: reading an evaluation output it was given (an
error names the path and what was expected), writing the table's JSON atomically, and the
paths it records (relative to the repository root, never absolute: the ship stage refuses
a JSON that holds one).

    data = read_json(path, ("variants", "episodes"), "an `eval --suite revisit` output")
    write_table(out, table)   # the JSON at `out`; strips go beside it: beside(out, name)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..atomic import atomic_write_bytes, atomic_write_json
from ..paths import ROOT, RUNS, relative

TABLES = RUNS / "tables"  # where a table's JSON goes unless --out says otherwise
# what the ship stage adds; an input that carries it (a shipped table fed back) loses it
PROVENANCE = ("command", "commit", "uncommitted_changes", "measured", "arguments")


def read_json(path, keys: tuple[str, ...], what: str) -> dict:
    """The JSON object at `path`, which must hold `keys` (it is `what`, in words)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (expected {what})")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON ({e}); expected {what}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}; expected {what} (an "
                         f"object with {list(keys)})")
    if missing := [k for k in keys if k not in data]:
        raise ValueError(f"{path} is not {what}: it lacks {missing} (it has {sorted(data)})")
    return data


def parse_models(items: list[str], flag: str = "--model") -> dict[str, Path]:
    """["name=dir", ...] (the values of `flag`) -> {name: Path}; a name given twice or an item
    without "=" is an error naming it."""
    models: dict[str, Path] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"{flag} takes NAME=DIR, got {item!r}")
        if name in models:
            raise ValueError(f"{flag} {name!r} is given twice")
        models[name] = Path(path)
    return models


def paired_models(args) -> dict[str, Path]:
    """The --model worlds of a table that pairs variants seed by seed with --reference, on
    held-out walks from --seed: an error names a reference that is not a model (unless
    --score-only: the worlds are scored into the cache, one job each, and the table is made
    later) and a seed below HELDOUT_SEED."""
    from .protocols import HELDOUT_SEED
    from .stats import seed_groups

    models = parse_models(args.model)
    if not getattr(args, "score_only", False) and args.reference not in seed_groups(models):
        raise ValueError(f"--reference {args.reference!r} is not a --model (got "
                         f"{sorted(seed_groups(models))})")
    if args.seed < HELDOUT_SEED:
        raise ValueError(f"--seed must be a held-out seed (>= {HELDOUT_SEED:,}), got "
                         f"{args.seed}")
    return models


def seed_row(pooled: dict, metric: str) -> dict:
    """A variant's row in a table that pairs by seed, from `stats.paired_seed_rows`' entry:
    `metric` (the mean over seeds), `<metric>_ci`, `per_seed`, `seeds` and any
    `paired_vs_<reference>`."""
    return {metric: pooled["mean"], f"{metric}_ci": [pooled["lo"], pooled["hi"]],
            **{k: v for k, v in pooled.items()
               if k in ("per_seed", "seeds") or k.startswith("paired_vs_")}}


def beside(out, name: str) -> Path:
    """The file `name` (a PNG strip) in the directory of the table's JSON `out`."""
    if Path(name).name != name:
        raise ValueError(f"a strip is written beside the table's JSON: give a file name, "
                         f"not the path {name!r}")
    return Path(out).with_name(name)


def cached(path, measure):
    """The JSON at `path`, measured (`measure()`) and written first if missing: a table's
    parts, so a rerun measures only what is missing."""
    path = Path(path)
    if path.exists():
        return json.loads(path.read_text())
    value = measure()
    atomic_write_json(path, value)
    return value


def cache_key(*parts) -> str:
    """A short hash of what a cached part was measured with (a world: its path and what
    its files hold; the walks' sizes and seeds): the part is measured again when any of
    them changes, also a world made anew at the same path."""
    return hashlib.sha256(json.dumps([_keyed(p) for p in parts]).encode()).hexdigest()[:12]


def _keyed(part) -> str | list[str]:
    """A part of a cache key: a world directory as its path and a digest of its files."""
    path = Path(ROOT, str(part))
    if not (path / "world_config.json").is_file():
        return str(part)
    digest = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f.relative_to(path).as_posix().encode())
        digest.update(f.read_bytes())
    return [str(part), digest.hexdigest()]


def write_strip(out, image) -> Path:
    """A table's picture (uint8 (h, w, 3)) as `<out's stem>_strip.png` beside its JSON
    `out`, atomically; prints and returns where (a ship stage copies it beside the table)."""
    from ..viz import to_png_bytes  # plotting's imports only for a picture
    path = beside(out, f"{Path(out).stem}_strip.png")
    atomic_write_bytes(path, to_png_bytes(image))
    print("wrote", path)
    return path


def write_scores(out, scores: dict, models: dict) -> Path:
    """--score-only: each world's cached scores at `out` (what the job made, for its stamp;
    the table reads the cache)."""
    return write_table(out, {"scored_only": True,
                             "models": {n: relative(p) for n, p in models.items()},
                             "scores": scores})


def best_row(b: dict, reference: str, validation=None, block_name: str = "",
             rows: str = "variants", metric: str = "recall_psnr") -> dict:
    """{"name", "chosen_on"}: the non-oracle row of `b[rows]` other than `reference` with
    the highest `metric` (pooled over seeds), read from the table `validation` (its block of
    the same name, else its only one) when given, else from `b` itself, which the record
    then says."""
    source, chosen_on = b, "the reported walks (no validation table given)"
    if validation:
        blocks = read_json(validation, ("engines",), "a table with engine blocks")["engines"]
        if block_name not in blocks and len(blocks) != 1:
            raise ValueError(f"{validation} has blocks {sorted(blocks)}; none is "
                             f"{block_name!r} and there is more than one to choose from")
        source = blocks.get(block_name) or next(iter(blocks.values()))
        chosen_on = (f"the validation walks of {relative(validation)} (first seed "
                     f"{source['first_seed']}, {source['walks']} walks)")
    others = [n for n in source[rows] if n != reference and "oracle" not in n]
    if not others:
        return {"name": reference, "chosen_on": f"no other non-oracle {rows[:-1]}"}
    name = max(others, key=lambda n: source[rows][n][metric])
    if name not in b[rows]:
        raise ValueError(f"the best {rows[:-1]} on {chosen_on}, {name!r}, is not among this "
                         f"table's {rows} {sorted(b[rows])}")
    return {"name": name, "chosen_on": chosen_on}


def paired_rows(table: dict, rows: str = "variants") -> dict:
    """{label: {"mean", "lo", "hi"}}: each row's paired difference with the table's
    reference, per engine block (`rows`: "variants" of `table recall`, "methods" of `table
    loops`), for `viz.interval_figure`."""
    ref = table["reference"]
    return {f"{block}: {name} - {ref}": v[f"paired_vs_{ref}"]
            for block, b in table["engines"].items() for name, v in b[rows].items()
            if f"paired_vs_{ref}" in v}


def with_engines_of(table: dict, path) -> dict:
    """`table` (one block under "engines") with the blocks of the table at `path` (an
    earlier call's, another engine's) beside its own, so one JSON holds every engine; the
    two must pair with the same reference."""
    other = read_json(path, ("engines", "reference"), "a table with engine blocks")
    if other["reference"] != table["reference"]:
        raise ValueError(f"{path} pairs with {other['reference']!r}, this table with "
                         f"{table['reference']!r}: one reference per table")
    return {**table, "models": {**other.get("models", {}), **table["models"]},
            "engines": {**_stamped_blocks(other), **_stamped_blocks(table)}}


# what a block keeps of the table that made it, once it sits beside another run's blocks
BLOCK_PROVENANCE = ("budget", "spec", "spec_hash", "commit", "measured")


def _stamped_blocks(table: dict) -> dict:
    """`table`'s engine blocks, each with the budget (and, for a shipped table, the spec and
    commit) of the run that made it, unless it says its own."""
    made = {k: table[k] for k in BLOCK_PROVENANCE if k in table}
    return {name: {**made, **b} for name, b in table["engines"].items()}


def write_table(out, table: dict) -> Path:
    """`table` as JSON at `out`, atomically; prints and returns where."""
    path = atomic_write_json(Path(out), table)
    print("wrote", path)
    return path
