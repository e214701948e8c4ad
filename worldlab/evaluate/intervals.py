"""Bootstrap intervals: every mean in the suite's tables comes with a 95% interval over
episodes (walks), so two rows can be told apart or not.

    ci = bootstrap([18.1, 18.9, 17.6, ...])  # {"mean", "lo", "hi", "n"}

The interval is the percentile bootstrap: the means of `resamples` resamples (with
replacement, seeded) of the per-episode values, cut at 2.5% and 97.5%. Values that are None
or NaN (an episode a protocol could not score) are left out and `n` says how many counted.
"""

from __future__ import annotations

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


def bootstrap(values, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = 0
              ) -> dict:
    """{"mean", "lo", "hi", "n"} of the per-episode `values` (a 1-D sequence)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    x = np.array([v for v in values if v is not None], dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    idx = np.random.default_rng(seed).integers(0, len(x), (resamples, len(x)))
    means = x[idx].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return {"mean": float(x.mean()), "lo": float(lo), "hi": float(hi), "n": int(len(x))}


def fmt(ci: dict | None, digits: int = 2) -> str:
    """'18.16 [17.90, 18.41]' (or '-' when nothing was scored)."""
    if not ci or ci.get("mean") is None:
        return "-"
    return f"{ci['mean']:.{digits}f} [{ci['lo']:.{digits}f}, {ci['hi']:.{digits}f}]"
