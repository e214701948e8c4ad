"""The long-horizon protocol on a tiny world whose right answer is known: an oracle that
lands on the true latents makes open loop, drift-free and the autoencoder one stream; an
oracle that repeats the last context latent freezes (motion 0) and scores repeat-last.

Frames are a fixed texture one grey level brighter every step, so repeating frame f - 1
j steps later is off by exactly j levels everywhere: PSNR 20 log10(255 / j)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import worldlab as wl
from worldlab.episodes import Episode
from worldlab.evaluate.long import (generate_walk, long_horizon, loop_closure_frames,
                                    loop_closure_scores, motion)
from worldlab.pretrained import World

from oracle_worlds import OracleModel, straight_walk, tiny_autoencoder

SIZE, FRAMES = 32, 80  # frames 33-64 early, 65-80 late


def textured_walk(seed: int, frames: int = FRAMES) -> Episode:
    texture = np.random.default_rng(seed).integers(40, 120, (SIZE, SIZE, 1))
    rgb = np.stack([np.repeat(texture + k, 3, axis=2) for k in range(frames)]).astype(np.uint8)
    return straight_walk(rgb, seed, 0.1)


@pytest.fixture(scope="module")
def walks():
    episodes = [textured_walk(s) for s in range(2)]
    cfg, ae, latents = tiny_autoencoder(episodes, SIZE)

    def world(mode):
        return World(ae, OracleModel(latents, cfg.model.chunk_frames, mode), cfg,
                     torch.device("cpu"))
    return world, episodes


def test_the_truth_is_drift_free_and_scores_the_autoencoder(walks):
    world, episodes = walks
    ticks = []
    r = long_horizon(world("truth"), episodes, progress=ticks.append)
    f = world("truth").chunk_frames
    assert sum(ticks) == 2 * (FRAMES // f - 1) and r["walks"] == 2 and r["frames"] == FRAMES
    assert r["window_early"] == [33, 64] and r["window_late"] == [65, 80]
    for w in ("early", "late"):
        assert r[f"psnr_{w}"] == pytest.approx(r[f"psnr_drift_free_{w}"], abs=0.05)
        assert r[f"psnr_{w}"] == pytest.approx(r[f"psnr_ae_{w}"], abs=0.05)
        assert r[f"sharpness_ratio_vs_ae_{w}"] == pytest.approx(1.0, abs=0.02)
        assert r[f"sharpness_ratio_vs_drift_free_{w}"] == pytest.approx(1.0, abs=0.02)
        assert r[f"motion_ratio_vs_ae_{w}"] == pytest.approx(1.0, abs=0.05)
    # repeat-last: frame f - 1 shown at frame k is off by k - (f - 1) grey levels
    late = np.arange(65, 81) - 1 - (f - 1)
    assert r["psnr_repeat_late"] == pytest.approx(np.mean(20 * np.log10(255 / late)), abs=1e-3)
    curves = r["curves"]
    assert len(curves["frame"]) == len(curves["psnr_open_loop"]) == (FRAMES - f) // 10
    assert curves["frame"][0] == f + 6  # the first generated frames, not the context
    assert np.isfinite(curves["psnr_repeat"]).all()
    assert -1 <= r["ssim_late"] <= 1 and r["sharpness_ratio_vs_engine_late"] > 0
    assert r["psnr_warp_late"] > 0 and r["motion_ratio_vs_engine_late"] > 0
    # a straight walk never comes back: no loop-closure frame, no loop-closure score
    assert r["loop_closure_frames"] == 0 and r["loop_closure_psnr_late"] is None
    json.dumps(r)  # every number is plain JSON


def test_loop_closure_frames_are_those_that_come_back_far_enough(walks):
    """Frames 66-80 stand where frames 1-15 stood: with a gap of 40 they close the loop,
    with a gap of 70 only those 71 or more frames on do; their scores are walk means."""
    ep = textured_walk(0)
    ep.c2w[65:80] = ep.c2w[0:15]
    late = slice(64, 80)
    np.testing.assert_array_equal(loop_closure_frames(ep, late, min_gap=40), np.arange(65, 80))
    np.testing.assert_array_equal(loop_closure_frames(ep, late, min_gap=70), [])
    scores = [{f"psnr_{s}": np.arange(80.0) for s in ("open_loop", "repeat", "warp",
                                                       "autoencoder")}] * 2
    r = loop_closure_scores(scores, [np.array([70, 72]), np.array([], np.int64)])
    assert r["loop_closure_frames"] == 2 and r["loop_closure_psnr_late"] == 71.0
    assert r["loop_closure_psnr_late_per_walk"][0] == 71.0
    assert r["loop_closure_psnr_repeat_late_per_walk"][1] is None


def test_a_frozen_world_shows_no_motion(walks):
    world, episodes = walks
    r = long_horizon(world("repeat"), episodes)
    assert r["motion_ratio_vs_ae_late"] < 0.05  # it never moves again
    assert r["psnr_late"] < r["psnr_drift_free_late"] + 1.0


def test_explored_frames_are_the_engines_and_move_the_windows(walks):
    """`explore`: the open loop shows (and holds) the engine's first frames; repeat-last
    and warp-last start from the last of them; the early window and the curves move on."""
    world, episodes = walks
    w = world("repeat")
    f = w.chunk_frames
    walk = generate_walk(w, episodes[0], drift_free=False, explore=2 * f)
    np.testing.assert_array_equal(walk["open_loop"][:2 * f], episodes[0].rgb[:2 * f])
    np.testing.assert_array_equal(walk["repeat"][-1], episodes[0].rgb[2 * f - 1])
    np.testing.assert_array_equal(walk["warp"][:2 * f], episodes[0].rgb[:2 * f])
    r = long_horizon(w, episodes, drift_free=False, explore=2 * f)
    assert r["given_frames"] == 2 * f and "psnr_drift_free_late" not in r
    assert r["window_early"] == [33 + f, 64 + f] and r["window_late"] == [65 + f, 80]
    late = np.arange(64 + f, 80) - (2 * f - 1)  # grey levels from the last given frame
    assert r["psnr_repeat_late"] == pytest.approx(np.mean(20 * np.log10(255 / late)), abs=1e-3)
    assert r["curves"]["frame"][0] == 2 * f + 6
    for bad in (f + 1, -f, True, 40):  # not whole chunks, negative, a bool, too long a walk
        with pytest.raises(ValueError, match="explore"):
            long_horizon(w, episodes, explore=bad)


def test_motion_and_bad_walks(walks):
    frames = np.zeros((3, 4, 4, 3), np.uint8)
    frames[2] = 10
    np.testing.assert_allclose(motion(frames), [0.0, 0.0, 10.0])
    world, episodes = walks
    with pytest.raises(ValueError, match="longer than 64 frames"):
        long_horizon(world("truth"), [textured_walk(0, 64)])
    with pytest.raises(ValueError, match="walks of one length"):
        long_horizon(world("truth"), [textured_walk(0), textured_walk(1, 72)])


def test_cli_fine_tunes_a_method_then_scores_worlds_on_the_same_walks(tmp_path):
    """`train long-horizon` fine-tunes a world with one switch; `eval --suite long` scores
    several worlds on the same walks: the same world twice scores the same."""
    from worldlab.cli import main

    from synthetic_episodes import synthetic_store
    from test_play import make_tiny_world

    start = make_tiny_world(tmp_path / "start")
    store = synthetic_store(tmp_path / "store", episodes=2, t=16, size=32)
    run = tmp_path / "run"
    assert main(["train", "long-horizon", "--start", str(start), "--method", "error_bank",
                 "--data", str(store.root), "--steps", "2", "--batch-size", "2",
                 "--device", "cpu", "--out", str(run)]) == 0
    assert main(["train", "package", "--autoencoder", str(start / "autoencoder"),
                 "--world", str(run), "--out", str(tmp_path / "bank")]) == 0
    bank = wl.pretrained.load_world(tmp_path / "bank", device="cpu")
    assert bank.config.train.context_corruption == "bank"
    assert bank.config.train.forcing == "teacher" and bank.config.train.steps == 2

    out = tmp_path / "eval"
    assert main(["eval", "--suite", "long", "--model", f"a={start}", "--model",
                 f"b={start}", "--model", f"bank={tmp_path / 'bank'}", "--engine",
                 "procedural", "--episodes", "1", "--frames", "72", "--steps", "1",
                 "--device", "cpu", "--threads", "1", "--out", str(out)]) == 0
    r = json.loads((out / "long.json").read_text())
    a, b = r["methods"]["a"], r["methods"]["b"]
    assert a["psnr_late"] == b["psnr_late"] and a["sampling_steps"] == 1
    assert r["methods"]["bank"]["training"]["context_corruption"] == "bank"
    assert r["episodes"]["frames"] == 72 and r["episodes"]["start"] == "random"
    with pytest.raises(SystemExit, match="NAME=DIR"):
        main(["eval", "--suite", "long", "--model", "nameless"])


def test_seeds_pool_per_method():
    from worldlab.evaluate.long import SEED_KEYS, pool_methods

    def scores(v):
        return {**{k: v for k in SEED_KEYS}, "psnr_late_per_walk": [v - 1, v + 1]}
    pooled = pool_methods({"a": scores(1.0), "a_seed1": scores(2.0), "a_seed2": scores(6.0),
                           "b": scores(5.0)})
    assert list(pooled) == ["a"] and pooled["a"]["seeds"] == 3  # b has one seed
    late = pooled["a"]["psnr_late"]
    assert {k: late[k] for k in ("mean", "std", "min", "max", "per_seed")} == {
        "mean": 3.0, "std": pytest.approx(2.6458, abs=1e-4), "min": 1.0, "max": 6.0,
        "per_seed": [1.0, 2.0, 6.0]}
    # over walks: the seed-averaged walks are 2 and 4, so the interval spans them
    assert (late["walks"]["mean"], late["walks"]["lo"], late["walks"]["hi"]) == (3.0, 2.0, 4.0)
    assert "walks" not in pooled["a"]["psnr_early"]  # no per-walk values of it


def test_table_loops_pairs_methods_by_seed_on_the_same_loop_walks(tmp_path):
    """`table loops`: two seeds of one world against a reference pair at zero; the
    references and the walks are described; a rerun reads the cache."""
    from worldlab.cli import main

    from test_play import make_tiny_world

    w = make_tiny_world(tmp_path / "w")
    out, cache = tmp_path / "loops.json", tmp_path / "cache"
    args = ["table", "loops", "--model", f"tf={w}", "--model", f"tf_seed1={w}", "--model",
            f"x={w}", "--model", f"x_seed1={w}", "--reference", "tf", "--walks", "2",
            "--frames", "72", "--explore", "0", "--seed", "1400000", "--threads", "1",
            "--cache", str(cache), "--out", str(out)]
    assert main(args) == 0
    table = json.loads(out.read_text())
    b = table["engines"]["procedural"]
    assert b["walks"] == 2 and b["policy"] == "loops" and b["seeds"] == 2
    assert b["late_window"] == [65, 72] and b["loop_closure"]["min_gap_frames"] == 100
    x = b["methods"]["x"]
    assert x["paired_vs_tf"]["mean"] == pytest.approx(0.0, abs=1e-9)
    assert x["psnr_late"] == pytest.approx(b["methods"]["tf"]["psnr_late"])
    assert np.isfinite(b["psnr_repeat_late"]) and np.isfinite(b["psnr_drift_free_late"])
    # the procedural probes read 64 px frames; this tiny world makes 32 px ones: no realism
    assert x["realism_distance_late"] is None and "no realism score" in b["realism_note"]
    assert "paired_vs_tf" not in b["methods"]["tf"]
    assert len(x["curves"]["frame"]) == len(x["curves"]["psnr_open_loop"]) == 6  # 68 frames
    lo, hi = x["curves"]["psnr_open_loop_lo"], x["curves"]["psnr_open_loop_hi"]
    assert len(lo) == 6 and all(a <= m + 1e-6 and m <= c + 1e-6 for a, m, c in
                                zip(lo, x["curves"]["psnr_open_loop"], hi))
    # notebook 05's figure: a band and a line per method, then the two references
    from worldlab.evaluate.loop_table import curves_figure
    fig = curves_figure(b, "loops")
    assert [t.name for t in fig.data if t.showlegend is not False] == \
        ["tf", "x", "autoencoder", "repeat-last"]
    assert len(fig.data) == 6 and list(fig.data[3].y) == x["curves"]["psnr_open_loop"]
    # the best method and its bars (chosen here on these walks: no validation table)
    assert b["best"]["name"] == "x" and "no validation" in b["best"]["chosen_on"]
    assert b["bars"]["best_minus_reference_late_db"] == pytest.approx(0.0, abs=1e-9)
    assert b["bars"]["best_sharpness_ratio_vs_ae_late"] == x["sharpness_ratio_vs_ae_late"]
    cached = sorted(p.name for p in cache.iterdir())
    # the drift-free stream is run only for the row the table reads it from
    drift = {p.name.split("-")[0]: "psnr_drift_free_late" in json.loads(p.read_text())
             for p in cache.iterdir()}
    assert drift == {"tf": True, "tf_seed1": False, "x": False, "x_seed1": False}
    assert len(cached) == 4 and main(args + ["--strip"]) == 0
    assert sorted(p.name for p in cache.iterdir()) == cached
    strip = json.loads(out.read_text())["engines"]["procedural"]["strip"]
    assert strip["rows"] == ["engine", "tf", "x"] and strip["frames"] == [72]  # short walks
    assert (tmp_path / strip["file"]).is_file()


def test_a_second_engine_block_goes_beside_the_first(tmp_path):
    """--beside keeps an earlier call's engine blocks; another reference is refused."""
    from worldlab.evaluate.table_io import with_engines_of

    first = tmp_path / "first.json"
    first.write_text(json.dumps({"reference": "tf", "models": {"tf": "a"},
                                 "budget": "100 steps", "commit": "abc", "measured": "d1",
                                 "engines": {"procedural": {"walks": 16}}}))
    table = {"reference": "tf", "models": {"tf": "b"}, "budget": "200 steps",
             "engines": {"doom": {"walks": 16}}}
    both = with_engines_of(table, first)
    assert list(both["engines"]) == ["procedural", "doom"] and both["models"] == {"tf": "b"}
    # each block keeps what made it; the table's own fields are the newer run's
    assert both["engines"]["procedural"] == {"budget": "100 steps", "commit": "abc",
                                             "measured": "d1", "walks": 16}
    assert both["engines"]["doom"] == {"budget": "200 steps", "walks": 16}
    assert both["budget"] == "200 steps" and "commit" not in both
    with pytest.raises(ValueError, match="pairs with 'tf'.* 'none'"):
        with_engines_of({**table, "reference": "none"}, first)


def test_late_realism_is_zero_for_the_engine_itself_and_not_for_a_frozen_frame():
    """realism_late pools the window's frames of every walk: a stream equal to the engine's
    scores 0; repeat-last (one frame) far more; a probe-less size says why."""
    from worldlab.evaluate.long import realism_late

    ep = wl.evaluate.heldout_episodes("procedural", 1, 40, 64)[0]
    walk = {"engine": ep.rgb, "open_loop": ep.rgb, "autoencoder": ep.rgb,
            "warp": ep.rgb[::-1].copy(), "repeat": np.broadcast_to(ep.rgb[3], ep.rgb.shape)}
    r = realism_late([walk], slice(8, 40), "procedural", 64)
    assert r["realism_distance_late"] == pytest.approx(0.0, abs=1e-3)
    assert r["realism_distance_repeat_late"] > 1.0 and "32 frames per set" in r["realism_note"]
    none = realism_late([walk], slice(8, 40), "procedural", 32)
    assert none["realism_distance_late"] is None and "32 px" in none["realism_note"]


def test_loop_bars_judge_the_best_method_against_the_baseline_and_repeat_last():
    from worldlab.evaluate.loop_table import LOOP_BARS, loop_bar_values
    from worldlab.evaluate.memory_bars import bar_rows

    method = {"paired_vs_tf": {"mean": 1.2, "lo": 0.3, "hi": 2.0},
              "loop_closure_psnr_late": 21.0, "sharpness_ratio_vs_ae_late": 0.9,
              "motion_ratio_vs_engine_late": 0.7}
    b = {"methods": {"x": method}, "loop_closure_psnr_repeat_late": 18.5}
    values = loop_bar_values(b, "x", "tf")
    assert values == pytest.approx({
        "best_minus_reference_late_db": 1.2, "best_minus_reference_late_lo_db": 0.3,
        "best_loop_closure_minus_repeat_db": 2.5, "best_sharpness_ratio_vs_ae_late": 0.9,
        "best_motion_ratio_vs_engine_late": 0.7})
    assert [r["met"] for r in bar_rows(values, LOOP_BARS)] == [True, True, True, True, False]
    no_loops = {**b, "loop_closure_psnr_repeat_late": None}  # walks too short to come back
    assert "best_loop_closure_minus_repeat_db" not in loop_bar_values(no_loops, "x", "tf")
