"""The full evaluation suite: intervals, engine labels, the events and camera-following
protocols on synthetic walks with known answers (a model that returns the truth, one that
ignores its controls, one that never shows a character), the probes on the real procedural
engine, and the whole suite end to end on a tiny world."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from oracle_worlds import straight_walk
from worldlab import camera
from worldlab.episodes import record_episode
from worldlab.evaluate import registry
from worldlab.evaluate.camera_follow import camera_scores
from worldlab.evaluate.events import event_scores
from worldlab.evaluate.full import SuiteSizes, full_suite, suite_sizes
from worldlab.evaluate.full_report import headline_rows, save_strip, write_html
from worldlab.evaluate.stats import bootstrap
from worldlab.evaluate.predictors import RepeatPredictor, as_predictor
from worldlab.model.probes import MOTION_FIELDS, FrameProbe
from worldlab.train.probes import (LabelledWalks, Probes, kind_labels, load_probes,
                                   motion_usable, relative_motion, train_probes)

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
RED = np.array([255, 0, 0], np.uint8)


# ----------------------------------------------------------------------------------------
# Known-answer models and probes
# ----------------------------------------------------------------------------------------


class Truth:
    """Returns the engine's own frames: every protocol must score it as the engine."""

    name, chunk_frames, size = "truth", 4, 16

    def predict(self, episode, start, context, frames, actions=None, c2w=None, seed=0):
        return episode.rgb[start + context:start + frames].copy()


class Blank(Truth):
    """Never shows anything: grey frames."""

    name = "blank"

    def predict(self, episode, start, context, frames, actions=None, c2w=None, seed=0):
        return np.full((frames - context, self.size, self.size, 3), 128, np.uint8)


class RedProbe:
    """An exact kinds probe for walks whose only character is a red square."""

    config = SimpleNamespace(outputs=("imp",))

    def predict(self, frames):
        return (frames == RED).all(-1).any((1, 2)).astype(float)[:, None]


class BiasedYawProbe:
    """A motion probe for walks whose green channel is the yaw in degrees: it reads the
    yaw change between two frames exactly, plus a 1 degree bias (its engine error)."""

    config = SimpleNamespace(gap=2)

    def predict(self, frames, later):
        out = np.zeros((len(frames), 4))
        out[:, 2] = later[:, 0, 0, 1].astype(float) - frames[:, 0, 0, 1] + 1.0
        return out


def event_walk(seed: int, imp_from: int | None):
    """A 16-frame grey walk; from frame `imp_from` on a red square is in view."""
    rgb = np.full((16, 16, 16, 3), 90, np.uint8)
    kinds = np.zeros((16, 1), bool)
    if imp_from is not None:
        rgb[imp_from:, 6:10, 6:10] = RED
        kinds[imp_from:] = True
    return straight_walk(rgb, seed, 0.1), kinds


def labelled(pairs) -> LabelledWalks:
    return LabelledWalks([p[0] for p in pairs], [p[1] for p in pairs], ("imp",))


def test_bootstrap_interval_brackets_the_mean_and_skips_missing_values():
    assert bootstrap([2.0, 2.0, 2.0]) == {"mean": 2.0, "lo": 2.0, "hi": 2.0, "n": 3}
    ci = bootstrap([0.0, 1.0, None, float("nan"), 0.0, 1.0])
    assert ci["n"] == 4 and ci["mean"] == 0.5 and 0.0 <= ci["lo"] < 0.5 < ci["hi"] <= 1.0
    assert bootstrap([]) == {"mean": None, "lo": None, "hi": None, "n": 0}
    with pytest.raises(ValueError, match="level"):
        bootstrap([1.0], level=1.5)


def test_kind_labels_count_only_character_pixels_of_each_kind():
    inst = np.zeros((8, 8), np.int32)
    inst[:2, :2] = 5  # 4 pixels of an imp
    inst[4:, 4:] = 7  # 16 pixels of something that is not a character
    things = {5: "imp"}
    assert kind_labels(inst, things, ("imp", "monster"), 4).tolist() == [1, 0]
    assert kind_labels(inst, things, ("imp", "monster"), 5).tolist() == [-1, 0]  # a sliver
    assert kind_labels(inst, {}, ("imp",), 4).tolist() == [0]


def test_relative_motion_reads_forward_strafe_yaw_and_pitch():
    a = camera.pose_from_heading(np.array([1.0, 2.0, 1.5]), 30.0, 0.0)
    yaw = np.radians(30.0)
    ahead = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    right = np.array([np.sin(yaw), -np.cos(yaw), 0.0])
    b = camera.pose_from_heading(np.array([1.0, 2.0, 1.5]) + 2 * ahead + 0.5 * right,
                                 40.0, -5.0)
    np.testing.assert_allclose(relative_motion(a[None], b[None])[0], [2.0, 0.5, 10.0, -5.0],
                               atol=1e-6)


def test_events_protocol_scores_truth_as_the_engine_and_a_blank_model_zero():
    p = 8
    prompted = labelled([event_walk(k, p if k % 4 else None) for k in range(8)])
    plain = labelled([event_walk(k, None if k != 3 else 2) for k in range(8)])
    walks = {"prompt": "an imp", "prompt_frame": p, "prompted": prompted, "plain": plain}
    probes = Probes(RedProbe(), None, {"kinds": {"imp": {"usable": True}}})
    out = event_scores({"truth": Truth(), "blank": Blank(),
                        "repeat": RepeatPredictor(16, 4)}, walks, probes)["rows"]
    assert out["truth"] == out["engine_probe"] == out["engine_labels"]
    assert out["truth"]["hit_share"]["mean"] == 6 / 8
    assert out["truth"]["false_alarm_share"]["mean"] == 1 / 8
    assert out["blank"]["hit_share"]["mean"] == 0.0
    assert out["repeat"]["hit_share"]["mean"] == 0.0  # the context had no imp
    assert out["repeat"]["false_alarm_share"]["mean"] == 1 / 8  # walk 3's imp persists


def test_the_events_protocol_walks_from_the_suites_seed():
    """Every protocol of the suite draws its walks from `--seed` (SuiteSizes.seed), the
    events too: their seeds start SEED_OFFSET above it."""
    from worldlab.evaluate.events import SEED_OFFSET
    from worldlab.evaluate.suite import events as protocol
    from worldlab.evaluate.suite.base import SuiteRun

    world = SimpleNamespace(size=32, chunk_frames=4)
    probes = Probes(RedProbe(), None, {"kinds": {"imp": {"usable": True}}})
    for seed in (1_000_000, 1_200_000):
        run = SuiteRun(world, {"truth": Truth()}, probes,
                       SuiteSizes(event_walks=1, seed=seed), "procedural", {})
        assert protocol.PROTOCOL.run(run)[0]["events"]["first_seed"] == seed + SEED_OFFSET


def test_events_protocol_refuses_a_probe_below_the_accuracy_bar():
    walks = {"prompt": "x", "prompt_frame": 8, "prompted": labelled([event_walk(0, 8)]),
             "plain": labelled([event_walk(0, None)])}
    probes = Probes(RedProbe(), None, {"kinds": {"imp": {"usable": False}}})
    assert "skipped" in event_scores({"truth": Truth()}, walks, probes)


def test_camera_following_ratio_is_one_for_the_truth_and_large_for_a_frozen_model():
    eps = [straight_walk(np.zeros((12, 16, 16, 3), np.uint8), k, 0.0) for k in range(3)]
    for ep in eps:  # turn 3 degrees a step; the green channel says the yaw
        ep.c2w[:] = [camera.pose_from_heading(np.zeros(3), 3.0 * t, 0.0) for t in range(12)]
        ep.rgb[..., 1] = (3 * np.arange(12))[:, None, None]
    f = 4
    truth = {"context": f, "true": [ep.rgb[f:] for ep in eps], "mirrored": []}
    frozen = {"context": f, "true": [np.repeat(ep.rgb[f - 1:f], 8, 0) for ep in eps],
              "mirrored": []}
    probe = BiasedYawProbe()
    yaw_t = camera_scores(truth, eps, probe)["controls"]["yaw"]
    yaw_f = camera_scores(frozen, eps, probe)["controls"]["yaw"]
    assert yaw_t["engine_error"]["mean"] == pytest.approx(1.0)
    assert yaw_t["ratio"] == pytest.approx(1.0)
    assert yaw_f["error"]["mean"] == pytest.approx(5.0)  # 6 degrees commanded, 1 read
    assert yaw_f["ratio"] == pytest.approx(5.0)
    assert yaw_t["commanded_motion"] == pytest.approx(6.0)


# ----------------------------------------------------------------------------------------
# Real probes, real engine
# ----------------------------------------------------------------------------------------


def test_prompts_at_steps_fire_the_event_and_label_the_character():
    frames = []
    ep = record_episode("procedural", 3, 8, 32, prompts={3: "summon a monster"},
                        callback=lambda i, obs: frames.append(obs.things))
    assert [(e.name, e.step) for e in ep.events] == [("summon_monster", 3)]
    assert ep.caption_at(3).event == "summon a monster"
    assert len(frames) == 8 and "imp" not in frames[2].values() and "imp" in frames[3].values()


def test_train_probes_saves_checked_probes_that_load_and_predict(tmp_path):
    run = train_probes("procedural", tmp_path / "p", walks=3, held_walks=1, frames=12,
                       size=32, gap=2, steps=4, batch_size=8)
    report = json.loads((tmp_path / "p" / "probes.json").read_text())
    assert set(report["kinds"]) == {"imp", "robot", "slime"}
    assert set(report["motion"]) == set(MOTION_FIELDS)
    assert all(isinstance(v["usable"], bool) for v in report["kinds"].values())
    loaded = load_probes(tmp_path / "p")
    rgb = np.zeros((5, 32, 32, 3), np.uint8)
    np.testing.assert_allclose(loaded.kinds.predict(rgb), run.kinds.predict(rgb), atol=1e-6)
    assert loaded.motion.predict(rgb, rgb).shape == (5, 4)
    with pytest.raises(ValueError, match="32 px"):
        loaded.kinds.predict(np.zeros((1, 64, 64, 3), np.uint8))
    with pytest.raises(ValueError, match="two"):
        loaded.motion.predict(rgb)


def test_a_motion_control_is_scored_only_where_the_probe_beats_the_mean_motion():
    assert motion_usable({"mae_over_mean_motion": 0.4})
    assert not motion_usable({"mae_over_mean_motion": 0.95})  # DOOM's strafe
    assert not motion_usable({"mae_over_mean_motion": None})  # a control never varied


def test_probe_configs_and_suite_sizes_name_bad_values():
    with pytest.raises(ValueError, match="task"):
        FrameProbe(task="colour")
    with pytest.raises(ValueError, match="scale"):
        FrameProbe(task="motion", outputs=MOTION_FIELDS, scale=(1.0,), gap=2)
    with pytest.raises(ValueError, match="episodes"):
        suite_sizes(["episode=3"])
    with pytest.raises(ValueError, match="horizon"):
        SuiteSizes(horizon=0)
    assert suite_sizes(["episodes=3"]).episodes == 3
    with pytest.raises(TypeError, match="predict"):
        as_predictor(object())


def test_full_suite_runs_end_to_end_on_a_tiny_world(world, tmp_path):
    probes = train_probes("procedural", None, walks=2, held_walks=1, frames=12, size=32,
                          gap=2, steps=2, batch_size=4)
    probes.report["kinds"]["imp"]["usable"] = True  # an untrained probe: exercise the path
    sizes = SuiteSizes(episodes=1, horizon=8, starts=1, runtime_chunks=6, revisit_walks=1,
                       revisit_frames=24, cost_chunks=0, long_walks=1, long_frames=72,
                       event_walks=1)
    titles = []
    result, strips = full_suite(world, None, probes, sizes, progress=titles.append)
    assert result["protocols"] == registry.names()  # every protocol, in the registry's order
    assert titles == [p.title for p in registry.PROTOCOLS]
    assert set(result["seconds"]) == {*registry.names(), "total"}
    assert set(result["next_chunk"]) == {"world", "repeat"}
    assert result["drift"]["world"]["psnr"]["n"] == 1
    assert set(result["camera"]["world"]["controls"]) == set(MOTION_FIELDS)
    assert set(result["events"]["rows"]) == {"engine_labels", "engine_probe", "world",
                                             "repeat"}
    assert not set(result["generalisation"]["seeds"]) & set(result["walks"]["seeds"])
    assert strips["main"]["engine"].shape == strips["main"]["world"].shape
    assert all(len(r) == 3 for r in headline_rows(result))
    assert result["budget"]["repeat"] is None and set(result["budget"]) == {"world", "repeat"}
    assert headline_rows(result)[-1][:2] == ("budget", "training")
    page = write_html({"tiny": result}, {"tiny": strips}, tmp_path / "full.html")
    text = page.read_text()
    assert "plotly" in text and "data:image/png;base64" in text
    png = save_strip(strips["main"], tmp_path / "strip.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    json.dumps(result)  # the JSON the CLI writes


def test_walks_that_end_early_are_left_out_and_counted():
    from test_episodes import make_episode
    from worldlab.evaluate.suite.walks import walks_summary, whole

    walks = [make_episode(t=8, seed=0), make_episode(t=6, seed=1), make_episode(t=8, seed=2)]
    walks[1].meta["ended"] = "the player died"
    kept = whole(walks, 8, "held-out")
    assert [ep.meta["seed"] for ep in kept] == [0, 2]
    assert walks_summary(walks, kept, 8) == {
        "recorded": 3, "scored": 2, "frames": 8,
        "ended_early": [{"seed": 1, "frames": 6, "ended": "the player died"}]}
    with pytest.raises(ValueError, match=r"none of the 3 held-out walks reached 9 frames.*"
                                         r"the player died"):
        whole(walks, 9, "held-out")
