"""`table defaults` (worlds.json): a default world against the one it replaces on the same
walks, with the world issue's bars."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from worldlab.evaluate.defaults_table import BARS, bar_values
from worldlab.pretrained import load_world
from worldlab.viz import frame_grid

from test_play import make_tiny_world

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_a_world_and_the_one_it_replaces_share_walks_and_the_same_world_scores_the_same(
        tmp_path):
    """The same tiny world as new and old: equal scores on the same walks, every baseline
    beside them, the bars computed; a rerun reads the cache; a --world without its --old
    is refused before any work."""
    from worldlab.cli import main

    w = make_tiny_world(tmp_path / "w")
    out, cache = tmp_path / "worlds.json", tmp_path / "cache"
    args = ["table", "defaults", "--world", f"proc={w}", "--old", f"proc={w}", "--walks", "2",
            "--event-walks", "0", "--seed", "1100000", "--threads", "1", "--cache", str(cache),
            "--budget", "no training", "--strip",
            "--out", str(out)]
    assert main(args) == 0
    table = json.loads(out.read_text())
    b = table["worlds"]["proc"]
    assert table["budget"] == "no training"
    strip = np.asarray(Image.open(tmp_path / "worlds_strip.png"))
    size = load_world(w, device="cpu").size  # rows engine | old | world, 4 frames across
    assert strip.shape == frame_grid(np.zeros((12, size, size, 3), np.uint8), cols=4,
                                     pad=2).shape
    assert b["strip"]["rows"] == ["engine", "old", "world"]
    new, old = b["world"], b["old"]["world"]
    assert b["walks"] == 2 and b["engine"] == "procedural" and b["frames_per_walk"] == 136
    assert b["seeds_tried"] == 2 + len(b["ended_early"]) and b["heldout_map_walks"] is None
    assert new == old  # the same world on the same walks
    for key in ("next_chunk_psnr", "baseline_warp_psnr", "baseline_view_warp_psnr",
                "baseline_repeat_psnr",
                "autoencoder_psnr", "rollout128_psnr_mean", "rollout128_repeat_psnr_mean",
                "mirrored_drop_db", "rollout_sharpness_ratio"):
        assert isinstance(new[key], float), key
    lo, hi = new["next_chunk_psnr_ci"]
    assert lo <= new["next_chunk_psnr"] <= hi
    assert len(new["rollout128_psnr"]) == len(new["rollout128_repeat_psnr"]) == 128
    # the tiny world makes 32 px frames, the probes read 64: no realism, so no realism bar
    assert new["realism_distance"] is None and "realism_over_old" not in b["bars"]
    assert set(b["bars"]) <= set(BARS) and "event_hit_over_false_alarm" not in b["bars"]
    assert b["bars"]["next_chunk_minus_warp_db"] == pytest.approx(
        new["next_chunk_psnr"] - new["baseline_warp_psnr"])
    cached = sorted(p.name for p in cache.iterdir())
    assert len(cached) == 2 and main(args) == 0
    assert sorted(p.name for p in cache.iterdir()) == cached
    with pytest.raises(ValueError, match="--old of the same name"):
        main(["table", "defaults", "--world", f"a={w}", "--old", f"b={w}", "--out", str(out)])


def test_the_bars_read_the_events_and_the_old_worlds_realism():
    world = {"next_chunk_psnr": 23.0, "next_chunk_psnr_ci": [22.6, 23.4],
             "baseline_warp_psnr": 22.0, "rollout128_psnr_mean": 17.0,
             "rollout128_repeat_psnr_mean": 12.0, "mirrored_drop_db": 1.2,
             "rollout_sharpness_ratio": 0.7, "realism_distance": 40.0,
             "event_hit_rate": 0.5, "event_hit_rate_ci": [0.3, 0.7],
             "event_false_alarm_rate": 0.1, "event_false_alarm_rate_ci": [0.0, 0.2]}
    v = bar_values({"world": world, "old": {"world": {"realism_distance": 100.0}}})
    assert v == pytest.approx({
        "next_chunk_minus_warp_db": 1.0, "next_chunk_lo_minus_warp_db": 0.6,
        "rollout128_minus_repeat_db": 5.0, "mirrored_drop_db": 1.2,
        "rollout_sharpness_ratio": 0.7, "realism_over_old": 0.4,
        "event_hit_over_false_alarm": 5.0, "event_intervals_apart": 0.1})
    assert all(BARS[k].met(x) for k, x in v.items())
