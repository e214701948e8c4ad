"""Play that stays responsive: presses coalesce while a chunk is made (the latest intent
wins), frames are paced, the warm-up changes nothing, the widget's live path. Real objects:
the slot, the player and the loop directly, then the loop and the widget on a tiny
randomised world with the procedural engine as twin (see test_play.py)."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from test_play import assert_same_state, make_tiny_world
from worldlab.camera import Action
from worldlab.play import LiveLoop, WorldSession
from worldlab.play.live import FramePlayer, Mailbox
from worldlab.pretrained import load_world


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return load_world(make_tiny_world(tmp_path_factory.mktemp("tiny_world")), device="cpu")


def session(world) -> WorldSession:
    s = WorldSession(world)
    s.reset(engine="procedural", seed=0)
    return s


# ----------------------------------------------------------------------------------------
# The slot of one and the frame player
# ----------------------------------------------------------------------------------------


def test_mailbox_keeps_only_the_latest_intent():
    box = Mailbox()
    assert box.take(timeout=0.01) is None  # nothing waiting
    assert box.put("w") is False
    assert box.put("a") is True and box.put("d") is True  # each replaced one never taken
    assert (box.received, box.dropped) == (3, 2)
    assert box.take() == "d" and not box.pending()
    got = []
    taker = threading.Thread(target=lambda: got.append(box.take()))
    taker.start()
    box.close()  # a blocked taker wakes up with None
    taker.join(timeout=5)
    assert got == [None] and box.put("s") is False
    with pytest.raises(ValueError, match="None"):
        Mailbox().put(None)


def test_frame_player_paces_frames_and_holds_one_chunk():
    shown = []
    player = FramePlayer(lambda item: shown.append((item, time.perf_counter())), 0.05)
    t0 = time.perf_counter()
    player.play(range(4))
    player.play(range(4, 8))  # returns once the first chunk has left the queue
    assert time.perf_counter() - t0 >= 0.1  # at least frames 1..3 of chunk 1 were due
    assert player.wait_idle(timeout=5)
    player.close()
    assert [i for i, _ in shown] == list(range(8))
    gaps = np.diff([t for _, t in shown])
    assert gaps.min() >= 0.045, gaps  # one frame every frame_s, also across the chunks
    with pytest.raises(ValueError, match="frame_s"):
        FramePlayer(print, -1)


# ----------------------------------------------------------------------------------------
# The loop on a real session
# ----------------------------------------------------------------------------------------


def test_presses_while_a_chunk_is_made_coalesce_latest_wins(world):
    s, ref = session(world), session(world)
    shown, statuses = [], []
    live = LiveLoop(s, lambda r, ms: shown.append((r, ms)), frame_s=0.0,
                    status=lambda kind, text: statuses.append(kind))
    live.start(warm_up=False)
    with live.lock:  # the worker takes "w" and then waits here, as if the chunk were slow
        live.offer(Action(forward=0.25), "w")
        deadline = time.time() + 10
        while live.mailbox.pending() and time.time() < deadline:
            time.sleep(0.01)
        for key, action in [("a", Action(right=-0.25)), ("d", Action(right=0.25)),
                            ("ArrowLeft", Action(yaw=10.0))]:
            live.offer(action, key)  # 100 ms apart in the issue; here all while busy
    assert live.wait_idle(timeout=60)
    live.close()
    assert live.chunks == 2 and live.mailbox.dropped == 2  # "a" and "d" never played
    expected = ref.step_chunk(Action(forward=0.25)) + ref.step_chunk(Action(yaw=10.0))
    assert len(shown) == len(expected) == 2 * s.f
    for (got, ms), want in zip(shown, expected):
        assert np.array_equal(got.frame, want.frame) and got.step == want.step
    firsts = [ms for _, ms in shown[::s.f]]
    assert all(ms is not None and ms > 0 for ms in firsts)  # key-to-frame on chunk starts
    assert all(ms is None for i, (_, ms) in enumerate(shown) if i % s.f)
    assert statuses[0] == "ready" and "busy" in statuses and statuses[-1] == "closed"


def test_the_loop_survives_a_chunk_that_fails(world):
    s = WorldSession(world, twin=False)  # integrates poses: pitch past the limit raises
    s.reset(engine="procedural", seed=0)
    statuses, errors = [], []
    live = LiveLoop(s, lambda r, ms: None, frame_s=0.0, on_error=errors.append,
                    status=lambda kind, text: statuses.append(kind))
    live.offer(Action(pitch=30.0), "ArrowUp")  # held for a chunk: 120 degrees
    assert live.wait_idle(timeout=60)
    assert statuses[-1] == "error" and "pitch must be in" in str(errors[0])
    assert s.state.step_index == 0  # nothing changed
    live.offer(Action(forward=0.25), "w")
    assert live.wait_idle(timeout=60)
    live.close()
    assert statuses[-2:] == ["ready", "closed"] and s.state.step_index == s.f


def test_warm_up_changes_nothing(world):
    a, b = session(world), session(world)
    before = a.snapshot()
    assert a.warm_up() > 0
    assert_same_state(before, a.snapshot())
    for x, y in zip(a.step_chunk(Action(forward=0.2), "summon a monster"),
                    b.step_chunk(Action(forward=0.2), "summon a monster")):
        assert np.array_equal(x.frame, y.frame)
    assert_same_state(a.snapshot(), b.snapshot())


def test_loop_warms_up_first_and_reports_loading(world):
    s = session(world)
    statuses = []
    live = LiveLoop(s, lambda r, ms: None, frame_s=0.0,
                    status=lambda kind, text: statuses.append((kind, text)))
    live.offer(Action(forward=0.25), "w")  # a press during loading waits, then plays
    assert live.wait_idle(timeout=60)
    live.close()
    assert statuses[0][0] == "loading" and "silent chunk" in statuses[0][1]
    assert live.warm_up_s is not None and live.chunks == 1 and s.state.step_index == s.f


# ----------------------------------------------------------------------------------------
# The widget's live path
# ----------------------------------------------------------------------------------------


def test_notebook_game_live_keys_show_motion_and_stats(world):
    from worldlab.play import NotebookGame

    s = session(world)
    game = NotebookGame(s)
    assert "not started" in game.status.value
    frames = []
    game.image.observe(lambda change: frames.append(change["new"]), names="value")
    assert game.show() is game.widget
    assert game.offer("w") is False and game.offer("q") is False  # q: not a key, ignored
    assert game.live.wait_idle(timeout=60)
    assert len(frames) == s.f  # the chunk's frames one by one, not one jump
    assert "key to frame" in game.stats.value and "frames/s" in game.stats.value
    assert "ready" in game.status.value and s.state.step_index == s.f
    with game.lock:  # a cell using the session while the game is live
        assert s.current().step == s.f
    first = game.restart()  # e.g. after the engine's player died: the level from its start
    assert first.step == 0 and s.state.step_index == 0 and len(game._trail) == 1
    assert "restarted" in game.status.value
    game.close()
    assert not game.errors.outputs


# ----------------------------------------------------------------------------------------
# The quickstart's baselines on a session's own run
# ----------------------------------------------------------------------------------------


def test_baseline_psnr_on_the_sessions_own_run(world):
    from test_play import WALK
    from worldlab.engines import make_engine
    from worldlab.evaluate import warp_to_poses
    from worldlab.metrics import frame_psnr
    from worldlab.play import baseline_psnr

    s = session(world)
    context = s.current()  # the last context frame: the engine's own
    results = [s.step(a) for a in WALK * 2]
    curves = baseline_psnr(s, results)
    twins = np.stack([r.twin_frame for r in results])
    repeat = np.repeat(context.twin_frame[None], len(results), axis=0)
    np.testing.assert_allclose(curves["repeat last frame"], frame_psnr(repeat, twins))
    assert len(curves["warp last frame"]) == len(results)
    assert np.isfinite(curves["warp last frame"]).all()
    with pytest.raises(ValueError, match="in order"):
        baseline_psnr(s, results[1:])
    # warping a frame into its own pose gives it back (up to the splat's edge pixels)
    engine = make_engine("procedural", size=world.size)
    obs = engine.reset(seed=0)
    engine.close()
    same = warp_to_poses(obs.rgb, obs.depth, obs.c2w, obs.K, obs.c2w[None])[0]
    assert (same == obs.rgb).all(-1).mean() > 0.95


def test_scores_json_holds_the_baselines_beside_the_model(world, tmp_path):
    from test_play import WALK
    from worldlab.play import baseline_psnr, write_outputs

    s = session(world)
    first = s.current()
    results = [s.step(a) for a in WALK]
    curves = baseline_psnr(s, results)
    data = write_outputs(tmp_path, first, results, fps=8.0, baselines=curves)
    saved = json.loads((tmp_path / "scores.json").read_text())
    assert saved["baseline_repeat_psnr"] == data["baseline_repeat_psnr"] == \
        curves["repeat last frame"]
    assert saved["baseline_warp_psnr"] == curves["warp last frame"]
    assert len(saved["psnr"]) == len(saved["baseline_warp_psnr"]) == len(results)
    with pytest.raises(ValueError, match="one value per step"):
        write_outputs(tmp_path / "bad", first, results, fps=8.0,
                      baselines={"repeat last frame": [1.0]})
    assert not (tmp_path / "bad").exists()
