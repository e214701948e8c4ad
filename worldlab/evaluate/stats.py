"""Statistics of the tables: intervals over walks, paired differences, pooling over seeds.

Every mean in a table comes with a 95% interval over walks (held-out episodes), so two rows
can be told apart or not. Every interval here is the percentile bootstrap, drawn by one
function (`_resample`, cut by `_cut`): the walks are resampled with replacement
`resamples` times (seeded numpy), the statistic is taken on each resample, and the 2.5%
and 97.5% quantiles of those are the interval.

    bootstrap([18.1, 18.9, 17.6])            # one row: {"mean", "lo", "hi", "n"}
    paired(world, repeat)                    # world - repeat walk by walk: the same keys
    pool_seeds({"a": [...], "a_seed1": [...]})  # one variant trained at several seeds
    combine_seeds(rows, keys)                # rows "x", "x_seed1", ... -> mean, std over seeds

Values that are None or NaN (a walk a protocol could not score) are left out and `n` says
how many counted; for paired values and seeds a walk is left out when any side lacks it,
and `left_out` counts those.
"""

from __future__ import annotations

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95
SEED_SUFFIX = "_seed"  # a row trained with another seed: "<name>_seed<k>" beside "<name>"


def _values(values) -> np.ndarray:
    """(n,) float64 of a 1-D sequence, None kept as NaN (so walks stay aligned)."""
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64).ravel()


def _resample(n: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n) indices of `n` walks drawn with replacement: the one resampling."""
    return np.random.default_rng(seed).integers(0, n, (resamples, n))


def _cut(stats: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval of the resampled statistics (resamples,)."""
    lo, hi = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")


# ----------------------------------------------------------------------------------------
# Intervals of a mean
# ----------------------------------------------------------------------------------------


def bootstrap(values, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = 0
              ) -> dict:
    """{"mean", "lo", "hi", "n"} of the per-walk `values` (a 1-D sequence).

    >>> bootstrap([2.0, 2.0, None, 2.0])
    {'mean': 2.0, 'lo': 2.0, 'hi': 2.0, 'n': 3}
    """
    _check_level(level)
    x = _values(values)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    lo, hi = _cut(x[_resample(len(x), resamples, seed)].mean(1), level)
    return {"mean": float(x.mean()), "lo": lo, "hi": hi, "n": int(len(x))}


def bootstrap_interval(sums, counts, resamples: int = RESAMPLES, level: float = LEVEL,
                       seed: int = 0) -> list:
    """[lo, hi] of a pooled mean sum(sums) / sum(counts) over walks (per-walk sums and
    counts (e,), e.g. a walk's PSNR summed over its return frames and their number): the
    walks resampled, each resample's pooled mean, cut at the percentiles.

    >>> bootstrap_interval([30.0], [3])  # one walk: no spread
    [10.0, 10.0]
    """
    _check_level(level)
    sums, counts = np.asarray(sums, np.float64), np.asarray(counts, np.float64)
    if len(sums) == 0 or len(sums) != len(counts) or counts.sum() <= 0:
        raise ValueError(f"bootstrap_interval needs per-episode sums and counts of one "
                         f"length with frames, got {len(sums)} sums, counts {counts.tolist()}")
    idx = _resample(len(sums), resamples, seed)
    return list(_cut(sums[idx].sum(axis=1) / counts[idx].sum(axis=1), level))


def fmt(ci: dict | None, digits: int = 2) -> str:
    """'18.16 [17.90, 18.41]' (or '-' when nothing was scored)."""
    if not ci or ci.get("mean") is None:
        return "-"
    return f"{ci['mean']:.{digits}f} [{ci['lo']:.{digits}f}, {ci['hi']:.{digits}f}]"


# ----------------------------------------------------------------------------------------
# Paired differences and seeds
# ----------------------------------------------------------------------------------------


def paired(a, b, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = 0) -> dict:
    """a - b walk by walk (two per-walk sequences over the same walks), with the percentile
    bootstrap of its mean: {"mean", "lo", "hi", "n", "left_out"}. A walk where either is
    None or NaN is left out (`left_out` counts them). Pairing removes what the walks share
    (a hard walk is hard for both), so the interval is narrower than two rows' intervals.

    >>> paired([18.0, 20.0, 19.0], [17.0, 19.0, None])
    {'mean': 1.0, 'lo': 1.0, 'hi': 1.0, 'n': 2, 'left_out': 1}
    """
    x, y = _values(a), _values(b)
    if len(x) != len(y):
        raise ValueError(f"paired needs values of the same walks, got {len(x)} and {len(y)}")
    d = x - y
    kept = np.isfinite(d)
    return {**bootstrap(d[kept], resamples, level, seed), "left_out": int((~kept).sum())}


def seed_average(per_seed: dict) -> np.ndarray:
    """(walks,) the per-walk mean over seeds of {seed name: per-walk values}; NaN where any
    seed lacks the walk."""
    rows = [_values(v) for v in per_seed.values()]
    if not rows or len({len(r) for r in rows}) != 1:
        raise ValueError(f"seeds must score the same walks, got "
                         f"{ {k: len(r) for k, r in zip(per_seed, rows)} }")
    return np.stack(rows).mean(0)  # a NaN in any seed stays NaN


def pool_seeds(per_seed: dict, resamples: int = RESAMPLES, level: float = LEVEL,
               seed: int = 0) -> dict:
    """One variant trained at several seeds, each scored on the same walks ({seed name:
    per-walk values}): the mean over seeds of each seed's mean, each seed's mean
    (`per_seed`), and an interval over walks: the bootstrap of the seed-averaged per-walk
    values. Walks a seed could not score are left out for every seed (`left_out`), so
    `mean` is the interval's centre.

    >>> p = pool_seeds({"a": [1.0, 3.0], "a_seed1": [3.0, 5.0]})  # seed-averaged walks: 2, 4
    >>> p["mean"], p["lo"], p["hi"], p["n"], p["per_seed"]
    (3.0, 2.0, 4.0, 2, {'a': 2.0, 'a_seed1': 4.0})
    """
    walks = seed_average(per_seed)
    kept = np.isfinite(walks)
    means = {k: float(_values(v)[kept].mean()) if kept.any() else None
             for k, v in per_seed.items()}
    return {**bootstrap(walks[kept], resamples, level, seed), "left_out": int((~kept).sum()),
            "per_seed": means, "seeds": len(per_seed)}


def seed_groups(rows: dict) -> dict[str, list[str]]:
    """{base: [row names]}: rows "x", "x_seed1", ... grouped under "x" (in row order)."""
    groups: dict[str, list[str]] = {}
    for name in rows:
        groups.setdefault(name.split(SEED_SUFFIX)[0], []).append(name)
    return groups


def combine_seeds(rows: dict, keys: tuple[str, ...], per_walk=None) -> dict:
    """Rows scored under several training seeds ("x", "x_seed1", ...) pooled per base name:
    {base: {key: {"mean", "std", "min", "max", "per_seed"}, "seeds": n}} for `keys`, only
    for bases with at least two seeds. std is the sample standard deviation over seeds
    (ddof 1); min and max bound what the seeds gave; per_seed lists them in row order.
    With `per_walk(row, key)` (a row's per-walk values of key, or None), a key every seed
    has per-walk values of also gets "walks": `pool_seeds` of them.

    >>> pooled = combine_seeds({"x": {"p": 1.0}, "x_seed1": {"p": 3.0}, "y": {"p": 5.0}}, ("p",))
    >>> list(pooled), pooled["x"]["seeds"], pooled["x"]["p"]["mean"], pooled["x"]["p"]["per_seed"]
    (['x'], 2, 2.0, [1.0, 3.0])
    """
    out = {}
    for base, names in seed_groups(rows).items():
        if len(names) < 2:
            continue
        out[base] = {"seeds": len(names)}
        for key in keys:
            v = np.array([rows[n][key] for n in names], np.float64)
            out[base][key] = {"mean": float(v.mean()), "std": float(v.std(ddof=1)),
                              "min": float(v.min()), "max": float(v.max()),
                              "per_seed": v.tolist()}
            walks = {n: per_walk(rows[n], key) for n in names} if per_walk else {}
            if walks and all(w is not None for w in walks.values()):
                out[base][key]["walks"] = pool_seeds(walks)
    return out


def paired_seed_rows(per_walk: dict, reference: str, resamples: int = RESAMPLES,
                     level: float = LEVEL) -> dict:
    """Variants trained at several seeds ({row name "x" / "x_seed1": per-walk values}, every
    row on the same walks), each pooled over its seeds (`pool_seeds`: "mean", "lo", "hi",
    "per_seed", "seeds") and, but `reference`, paired walk by walk with `reference`'s row of
    the same seed, the difference averaged over seeds ("paired_vs_<reference>": "mean",
    "lo", "hi", "n").

    >>> rows = paired_seed_rows({"a": [1.0, 2.0], "b": [2.0, 4.0]}, "a")
    >>> rows["b"]["mean"], rows["b"]["paired_vs_a"]["mean"], "paired_vs_a" in rows["a"]
    (3.0, 1.5, False)
    """
    groups = seed_groups(per_walk)
    if reference not in groups:
        raise ValueError(f"the reference {reference!r} is not a row (rows: {sorted(groups)})")
    out = {}
    for base, names in groups.items():
        out[base] = pool_seeds({n: per_walk[n] for n in names}, resamples, level)
        if base == reference:
            continue
        pairs = [(n, reference + n[len(base):]) for n in names]
        missing = [r for _, r in pairs if r not in per_walk]
        if missing:
            raise ValueError(f"{base}'s seeds need {reference}'s of the same seed: {missing} "
                             f"was not given")
        diff = np.mean([_values(per_walk[n]) - _values(per_walk[r]) for n, r in pairs], 0)
        kept = np.isfinite(diff)
        out[base][f"paired_vs_{reference}"] = bootstrap(diff[kept], resamples, level)
    return out
