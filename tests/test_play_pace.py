"""Play says what a student needs to know: chunks slower than the game (the pace policy,
off and on, judged with injected budgets and loads, never the wall clock), prompts the
world was not trained on, and the session's status as data. A tiny untrained world
(`test_play.make_tiny_world`) with the procedural twin, seeded."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from worldlab.camera import Action
from worldlab.episodes import CHARACTER, SCENES
from worldlab.model.textenc import CaptionTable
from worldlab.play import PacePolicy, UnknownPromptWarning, WorldSession
from worldlab.play.pace import PaceVerdict, slow_note
from worldlab.pretrained import CAPTIONS_FILE, load_world

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
KNOWN = "an imp appears"
NEVER, ALWAYS = 1e9, 1e-6  # budgets in ms no chunk meets / every chunk meets


def session(world, steps=2, pace=None) -> WorldSession:
    s = WorldSession(world, steps=steps, pace=pace)
    s.reset(engine="procedural", seed=0)
    return s


def press(s, n):
    """n key presses of "w": n chunks made."""
    return [s.step_chunk(Action(forward=0.2))[-1] for _ in range(n)]


# ---- the policy alone: pure numbers in, a verdict out -----------------------------------

def test_policy_speaks_after_patience_slow_chunks_in_a_row():
    p = PacePolicy(patience=2)
    busy = (5.0, 2)  # load average 5 on 2 cores
    assert p.observe(100, 457, 4, busy).slow is False
    first = p.observe(900, 457, 4, busy)
    assert first.slow and first.note is None  # one slow chunk is not yet a pattern
    second = p.observe(900, 457, 4, busy)
    assert second.note == slow_note(900, 457, 2, busy) and second.switch_to is None
    assert "busy (load average 5.0 on 2 cores)" in second.note
    assert p.observe(100, 457, 4, busy) == PaceVerdict(False, None, None)  # back to pace
    assert p.slow_run == 0


def test_policy_tells_a_busy_machine_from_a_slow_one():
    assert "busy" in slow_note(900, 457, 3, (4.1, 2))
    assert "slow for this world" in slow_note(900, 457, 3, (0.3, 2))


def test_policy_switches_once_and_only_to_fewer_steps():
    on = PacePolicy(switch_steps=1, patience=1)
    v = on.observe(900, 457, 4, (3.0, 2))
    assert v.switch_to == 1 and "switched from 4 to 1 sampling steps" in v.note
    assert on.observe(900, 457, 1, (3.0, 2)).switch_to is None and on.switched
    assert PacePolicy(switch_steps=8, patience=1).observe(900, 457, 4, (3.0, 2)).switch_to \
        is None  # 8 steps would be slower: never a "faster" setting
    assert PacePolicy(budget_ms=1000).observe(900, 457, 4).slow is False  # its own budget


@pytest.mark.parametrize("kwargs, match", [
    ({"switch_steps": 0}, "switch_steps must be None .* or a positive int"),
    ({"switch_steps": True}, "switch_steps must be"),
    ({"budget_ms": -5}, "budget_ms must be None .* or a positive number"),
    ({"patience": 0}, "patience must be a positive int"),
])
def test_policy_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PacePolicy(**kwargs)


# ---- the policy in a real session -----------------------------------------------------

def test_session_off_reports_slow_chunks_and_changes_nothing(world):
    s = session(world, pace=PacePolicy(budget_ms=ALWAYS))
    ref = session(world)
    for a, b in zip(press(s, 3), press(ref, 3)):
        assert np.array_equal(a.frame, b.frame)  # reporting never changes a frame
    st = s.status()
    assert st.slow and not st.switched and st.steps == 2
    assert len(st.notes) == 1 and st.notes[0].startswith("slow: 3 chunks in a row")
    calm = session(world, pace=PacePolicy(budget_ms=NEVER))
    press(calm, 3)
    assert not calm.status().slow and calm.status().notes == ()


def test_session_on_switches_to_the_faster_setting_on_its_own(world):
    """After `patience` slow chunks the session samples with switch_steps: the same frames
    as a session switched by hand at that point."""
    s = session(world, steps=2, pace=PacePolicy(switch_steps=1, budget_ms=ALWAYS))
    ref = session(world, steps=2, pace=PacePolicy(budget_ms=NEVER))
    auto = press(s, 4)
    by_hand = press(ref, 2)
    ref.set_steps(1)
    by_hand += press(ref, 2)
    for a, b in zip(auto, by_hand):
        assert np.array_equal(a.frame, b.frame)
    st = s.status()
    assert st.switched and st.steps == 1 and s.steps == 1
    assert "switched from 2 to 1 sampling steps" in st.notes[0]
    with pytest.raises(ValueError, match="steps .* must be a positive int, got 0"):
        s.set_steps(0)
    assert s.steps == 1


def test_status_is_data(world):
    s = WorldSession(world, steps=2)
    with pytest.raises(RuntimeError, match="reset"):
        s.status()
    s.reset(engine="procedural", seed=3)
    press(s, 1)
    st = s.status()
    assert (st.step, st.engine_name, st.chunk_frames, st.steps) == (s.chunk_frames,
                                                                   "procedural",
                                                                   world.chunk_frames, 2)
    assert st.frame_rate > 0 and s.has_twin and not s.has_point_cache
    assert s.trained_engine == world.config.data.engine
    assert s.restart().step == 0 and s.status().step == 0


# ---- prompts the world was not trained on ---------------------------------------------

@pytest.fixture(scope="module")
def captioned_world(tmp_path_factory):
    """A tiny world shipped with a caption table that knows one event (as a trained world
    ships the captions it saw), loaded as `load_world` loads a shipped world."""
    from test_play import make_tiny_world

    path = make_tiny_world(tmp_path_factory.mktemp("captioned_world"))
    table = CaptionTable()
    table.embed([[(SCENES["procedural"], CHARACTER, ""), (SCENES["procedural"], CHARACTER,
                                                          KNOWN)]])
    table.save(path / CAPTIONS_FILE)
    return load_world(path, device="cpu")


def test_an_unknown_prompt_warns_and_names_the_known_ones(captioned_world):
    s = session(captioned_world)
    assert s.known_prompts() == (KNOWN,)
    with pytest.warns(UnknownPromptWarning, match=r"'summon a monster' is not one this world "
                                                  r"was trained on.*it knows: 'an imp "
                                                  r"appears'"):
        s.step(Action(forward=0.2), "summon a monster")  # accepted: not an error
    assert s.status().notes == (s.prompt_note("summon a monster"),)
    # the table in memory now holds that prompt too; what the world knows comes from its file
    assert WorldSession(captioned_world).known_prompts() == (KNOWN,)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownPromptWarning)
        s.step(Action(), KNOWN)  # a known prompt: no warning, and the note is gone
    assert s.prompt_note(KNOWN) is None and s.status().notes == ()
    with pytest.raises(ValueError, match="prompt is empty"):
        s.prompt_note("  ")


def test_a_world_without_captions_cannot_tell_and_stays_quiet(world):
    s = session(world)
    assert s.known_prompts() == ()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownPromptWarning)
        s.step(Action(), "summon a monster")
    assert s.status().notes == ()
