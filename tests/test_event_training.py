"""Teaching a world its events: prompts on chunk starts (data record --event-every,
--events), the clips whose last chunk starts the event (train.events), the fine-tune, and a
painted frame that keeps what the world drew in front of the cache (sample.paint_yield)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import worldlab as wl
from worldlab.engines import engine_class
from worldlab.engines.base import match_event
from worldlab.engines.policies import make_policy, with_events
from worldlab.episodes import EpisodeStore, LatentCache, record_many
from worldlab.episodes.datasets import clip_windows
from worldlab.pretrained import load_world
from worldlab.train.events import event_windows, finetune, mixed_windows
from worldlab.train.recipes import fill_latents

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

SPECS = engine_class("procedural").events


@pytest.fixture(scope="module")
def store(tmp_path_factory, world_dir):
    """Eight procedural walks of 32 frames, summon prompts only on chunk starts (4 frames),
    latents of the tiny world."""
    s = EpisodeStore(tmp_path_factory.mktemp("event_store"))
    record_many(s, "procedural", list(range(8)), 32, 32, "random_walk", 0.3, workers=1,
                event_every=4, event_kinds=("summon_monster",))
    fill_latents(s, LatentCache(s.root / "latents"), world_dir / "autoencoder", "cpu")
    return s


def _fired(prompt):
    return None if prompt is None else match_event(prompt, SPECS).name


def test_event_prompts_come_on_every_nth_step_and_of_the_kinds_asked():
    policy = with_events(make_policy("random_walk"), SPECS, 1.0, seed=3, every=4,
                         kinds=("summon_monster", "fireball"))
    policy.reset(0, 40)
    from worldlab.engines import make_engine

    engine = make_engine("procedural", size=32)
    try:
        obs = engine.reset(0)
        prompts = [policy.act(obs)[1] for _ in range(40)]
    finally:
        engine.close()
    steps = [i + 1 for i, p in enumerate(prompts) if p is not None]
    assert steps == list(range(4, 41, 4))  # rate 1: every 4th step, and only those
    assert {_fired(p) for p in prompts if p} <= {"summon_monster", "fireball"}
    plain = with_events(make_policy("random_walk"), SPECS, 0.5, seed=3)  # every step
    plain.reset(0, 40)
    assert with_events(make_policy("random_walk"), SPECS, 0.5, seed=3, every=1).every == 1


@pytest.mark.parametrize("every, kinds, match", [
    (0, None, "event every must be a positive number of steps, got 0"),
    (4, ("summon",), r"event kinds must be some of the engine's events .*got \('summon',\)"),
    (4, (), "event kinds must be some"),
])
def test_a_bad_event_schedule_is_refused_before_anything_is_recorded(tmp_path, every, kinds,
                                                                    match):
    with pytest.raises(ValueError, match=match):
        record_many(EpisodeStore(tmp_path / "s"), "procedural", [0], 8, 32, "random_walk", 0.3,
                    event_every=every, event_kinds=kinds)
    assert not (tmp_path / "s").exists()


def test_the_schedule_is_in_the_meta_and_the_index(store):
    entry = store.index[store.ids()[0]]
    assert entry["event_every"] == 4 and entry["event_kinds"] == ["summon_monster"]
    assert store.read(store.ids()[0]).meta["event_every"] == 4
    assert store.validate_all() == {}


def test_event_windows_are_the_clips_whose_last_chunk_starts_the_event(store):
    every = clip_windows(store, 16, 4, 4)
    chosen = event_windows(store, every, 16, 4)
    assert chosen, "a rate of 0.3 per chunk start brings summons into 8 walks"
    for episode_id, start in chosen:
        seg = store.read_track(episode_id).caption_at(start + 12)
        assert seg.start == start + 12 and _fired(seg.event) == "summon_monster"
    expected = [(i, s) for i, s in every
                if any(p.start == s + 12 and _fired(p.event) == "summon_monster"
                       for p in store.read_track(i).prompts)]
    assert chosen == expected
    assert event_windows(store, every, 16, 4, "fireball") == []
    with pytest.raises(ValueError, match="event 'imp' is not one of procedural's events"):
        event_windows(store, every, 16, 4, "imp")


def test_mixed_windows_hold_every_event_clip_and_others_to_the_share(store):
    every = clip_windows(store, 16, 4, 4)
    chosen = set(event_windows(store, every, 16, 4))
    mixed = mixed_windows(store, 16, 4, share=0.5, seed=0)
    assert chosen <= set(mixed) and len(mixed) == 2 * len(chosen)
    assert mixed == sorted(mixed, key=every.index)  # grouped by episode, in order
    assert mixed == mixed_windows(store, 16, 4, share=0.5, seed=0)
    assert set(mixed_windows(store, 16, 4, share=1.0)) == chosen
    with pytest.raises(ValueError, match="no clip of .* starts with a 'fireball' prompt; "
                                         "record events on chunk starts"):
        mixed_windows(store, 16, 4, event="fireball")
    with pytest.raises(ValueError, match=r"share must be in \(0, 1\], got 0"):
        mixed_windows(store, 16, 4, share=0)


def test_the_fine_tune_trains_on_the_mixed_clips_and_packages(tmp_path, store, world_dir):
    run = finetune(world_dir, store, tmp_path / "run", steps=2, batch_size=2)
    assert run.state["step"] == 2
    f = run.config.model.chunk_frames
    assert run.clips.windows == mixed_windows(store, f * run.config.data.clip_chunks, f)
    assert any(c[2] and _fired(c[2]) == "summon_monster" for c in run.clips.captions)
    wl.train.package(world_dir / "autoencoder", tmp_path / "run", tmp_path / "w")
    assert load_world(tmp_path / "w", device="cpu").config.train.steps == 2


def test_paint_yield_keeps_what_the_world_drew_in_front_of_the_cache(tmp_path, world_dir):
    """sample.paint_yield: a painted pixel whose own depth (the depth head on the world's
    frame) is under paint_yield times the render's stays the world's; 0 paints it over. A
    paint_yield without a depth head, or above 1, is refused."""
    from test_memory import drawn_at_first_chunk, memory_world
    from worldlab.config import make_config
    from worldlab.memory.stream import world_stream

    s = EpisodeStore(tmp_path / "s")
    record_many(s, "procedural", [0, 1, 2], 48, 32, "leave_and_return", workers=1)
    fill_latents(s, LatentCache(s.root / "latents"), world_dir / "autoencoder", "cpu")
    world = memory_world(tmp_path, world_dir, s, "cache3d_own")
    ep = s.read(s.ids()[0])
    w = dataclasses.replace(world, config=dataclasses.replace(world.config, sample=(
        dataclasses.replace(world.config.sample, composite="cache", paint_yield=0.9))))
    stream, drawn = drawn_at_first_chunk(w, ep)
    pose = stream.bank.poses([len(stream.bank) - 1])[0][0]
    covered, _ = stream._paint(drawn[0], pose)  # no depth: the render wins
    render_depth = stream._paint(drawn[0], pose)[1]
    painted = np.isfinite(render_depth)
    assert painted.mean() > 0.3
    near = np.where(np.arange(32)[None, :] < 16, 0.5 * render_depth, 2 * render_depth)
    near = np.where(painted, near, 1.0)
    kept, depth = stream._paint(drawn[0], pose, depth=near)
    left = painted & (np.arange(32)[None, :] < 16)
    assert np.array_equal(kept[left], drawn[0][left]) and np.isinf(depth[left]).all()
    right = painted & ~left
    assert np.array_equal(kept[right], covered[right])
    with pytest.raises(ValueError, match="sample.paint_yield"):
        make_config("tiny", sample__paint_yield=1.5)
    no_head = dataclasses.replace(w, depth_head=None)
    with pytest.raises(ValueError, match="sample.paint_yield=0.9 .* pass depth_head"):
        world_stream(dataclasses.replace(no_head, config=dataclasses.replace(
            no_head.config, memory=dataclasses.replace(no_head.config.memory,
                                                       cache3d="oracle"))), ep.K[0])
