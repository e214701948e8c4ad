"""The tables' statistics (`evaluate.stats`): the percentile bootstrap, paired differences
over walks, pooling over training seeds; golden numbers where the answer is known."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from worldlab.evaluate import stats
from worldlab.evaluate.stats import (bootstrap, bootstrap_interval, combine_seeds, fmt, paired,
                                     pool_seeds, seed_average)

NAN = float("nan")


def test_docstring_examples_hold():
    assert doctest.testmod(stats).failed == 0


def test_bootstrap_is_seeded_and_brackets_the_mean():
    x = np.random.default_rng(0).normal(18.0, 1.0, 40)
    ci = bootstrap(x)
    assert ci["lo"] < ci["mean"] < ci["hi"] and ci["n"] == 40
    assert ci["mean"] == pytest.approx(x.mean())
    assert bootstrap(x) == ci and bootstrap(x, seed=1) != ci
    # about 2 x 1.96 standard errors wide, as the normal approximation has it
    assert ci["hi"] - ci["lo"] == pytest.approx(2 * 1.96 * x.std() / np.sqrt(40), rel=0.1)
    assert bootstrap([None, NAN]) == {"mean": None, "lo": None, "hi": None, "n": 0}
    with pytest.raises(ValueError, match="level must be in"):
        bootstrap(x, level=0.0)


def test_bootstrap_golden_numbers_are_those_the_shipped_tables_were_made_with():
    """The resampling the suite's intervals have always used (seed 0, 2000 resamples)."""
    ci = bootstrap([17.0, 18.0, 19.5, 18.25])
    assert ci["mean"] == 18.1875 and ci["n"] == 4
    idx = np.random.default_rng(0).integers(0, 4, (2000, 4))
    means = np.array([17.0, 18.0, 19.5, 18.25])[idx].mean(1)
    assert (ci["lo"], ci["hi"]) == tuple(np.quantile(means, [0.025, 0.975]))


def test_constant_paired_differences_have_no_spread():
    a = [18.0, 21.5, 16.25, 19.0]
    d = paired(a, [v - 0.5 for v in a])
    assert d == {"mean": 0.5, "lo": 0.5, "hi": 0.5, "n": 4, "left_out": 0}


def test_pairing_removes_what_the_walks_share():
    """Walks differ by a lot, the two rows by a little: the paired interval is the
    difference's, far narrower than either row's."""
    rng = np.random.default_rng(1)
    walks = rng.normal(18.0, 3.0, 30)  # hard and easy walks
    a, b = walks + 0.3 + rng.normal(0, 0.1, 30), walks + rng.normal(0, 0.1, 30)
    d, row = paired(a, b), bootstrap(a)
    assert d["lo"] > 0 and d["mean"] == pytest.approx(0.3, abs=0.1)
    assert d["hi"] - d["lo"] < (row["hi"] - row["lo"]) / 10


def test_paired_leaves_out_walks_either_side_lacks():
    d = paired([1.0, None, 3.0, NAN, 5.0], [0.0, 1.0, None, 2.0, 4.0])
    assert (d["mean"], d["n"], d["left_out"]) == (1.0, 2, 3)
    assert paired([None], [1.0])["mean"] is None
    with pytest.raises(ValueError, match="same walks, got 2 and 3"):
        paired([1.0, 2.0], [1.0, 2.0, 3.0])


def test_pool_seeds_averages_seeds_then_resamples_walks():
    per_seed = {"a": [10.0, 12.0, NAN], "a_seed1": [14.0, 16.0, 20.0]}
    np.testing.assert_array_equal(seed_average(per_seed), [12.0, 14.0, NAN])
    p = pool_seeds(per_seed)
    # the third walk is left out for both seeds, so the mean is the interval's centre
    assert p["per_seed"] == {"a": 11.0, "a_seed1": 15.0} and p["left_out"] == 1
    assert (p["mean"], p["n"], p["seeds"]) == (13.0, 2, 2)
    assert p["lo"] >= 12.0 and p["hi"] <= 14.0
    assert p["lo"] < p["mean"] < p["hi"]
    with pytest.raises(ValueError, match="same walks"):
        seed_average({"a": [1.0], "a_seed1": [1.0, 2.0]})


def test_combine_seeds_groups_rows_and_pools_walks_when_given():
    rows = {"x": {"p": 1.0, "walks": [0.0, 2.0]}, "x_seed1": {"p": 2.0, "walks": [1.0, 3.0]},
            "x_seed2": {"p": 6.0, "walks": [5.0, 7.0]}, "y": {"p": 5.0, "walks": [5.0]}}
    plain = combine_seeds(rows, ("p",))
    assert list(plain) == ["x"] and plain["x"]["seeds"] == 3
    assert plain["x"]["p"] == {"mean": 3.0, "std": pytest.approx(np.sqrt(7.0)), "min": 1.0,
                               "max": 6.0, "per_seed": [1.0, 2.0, 6.0]}
    walks = combine_seeds(rows, ("p",), per_walk=lambda r, key: r["walks"])["x"]["p"]["walks"]
    assert (walks["mean"], walks["n"]) == (3.0, 2)
    assert (walks["lo"], walks["hi"]) == (2.0, 4.0)  # seed-averaged walks: 2 and 4


def test_pooled_ratio_interval_and_format():
    rng = np.random.default_rng(0)
    counts = rng.integers(20, 60, 12)
    sums = rng.normal(18.0, 1.0, 12) * counts
    lo, hi = bootstrap_interval(sums, counts, 1000, seed=3)
    assert lo < sums.sum() / counts.sum() < hi
    with pytest.raises(ValueError, match="sums and counts of one length"):
        bootstrap_interval([1.0, 2.0], [1])
    assert fmt({"mean": 18.156, "lo": 17.9, "hi": 18.41}) == "18.16 [17.90, 18.41]"
    assert fmt(bootstrap([])) == "-"
