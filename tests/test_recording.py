"""Recording episodes from the real engines, the `data` CLI end to end, statistics."""

import numpy as np
import pytest

from worldlab import camera
from worldlab.cli import build_parser, main, run
from worldlab.episodes import EpisodeStore
from worldlab.episodes.recording import (dataset_stats, map_of, record_episode, record_with,
                                         revisit_pairs)


def _same(a, b):
    for k in ("rgb", "depth", "c2w", "K", "actions", "instance"):
        x, y = getattr(a, k), getattr(b, k)
        assert (x is None and y is None) or np.array_equal(x, y), k
    strip = lambda m: {k: v for k, v in m.items() if k != "created"}  # noqa: E731
    assert a.prompts == b.prompts and a.events == b.events and strip(a.meta) == strip(b.meta)


def test_record_episode_procedural_schema_and_determinism():
    ep = record_episode("procedural", seed=3, frames=8, size=32, policy="random_walk",
                        event_rate=0.5)
    assert ep.rgb.shape == (8, 32, 32, 3) and ep.depth.shape == (8, 32, 32)
    assert not ep.actions[0].any() and set(ep.actions[1:, 0].tolist()) <= {0.0, 0.25}
    assert ep.meta["engine"] == "procedural" and ep.meta["seed"] == 3
    assert ep.meta["start"] == "player" and ep.meta["map"] is None
    x, y, yaw = ep.meta["start_pose"]  # frame 0's pose
    assert np.allclose(camera.pose_from_heading([x, y, ep.c2w[0, 2, 3]], yaw), ep.c2w[0])
    assert ep.meta["policy"] == "random_walk+events" and ep.meta["units"] == "metres"
    # every prompt change starts a segment, and the events carry frame indices
    assert ep.prompts[0].start == 0 and len(ep.prompts) >= 2
    assert ep.events and all(0 < e.step < 8 for e in ep.events)
    # the same seed and policy record the same episode
    _same(ep, record_episode("procedural", seed=3, frames=8, size=32, policy="random_walk",
                             event_rate=0.5))


def test_an_engine_frame_that_fails_the_episode_check_names_the_recording():
    def blind(i, obs):  # an engine fault from frame 5 on: depth 0, as a bad mesh gave
        if i >= 5:
            obs.depth[...] = 0.0
    with pytest.raises(ValueError, match=r"procedural recording of seed 3 \(random_walk, "
                                         r"start player, 8 frames\).*the first at frame 5"):
        record_episode("procedural", seed=3, frames=8, size=32, policy="random_walk",
                       callback=blind)


def test_record_episode_doom_has_per_frame_intrinsics():
    ep = record_episode("doom", seed=0, frames=6, size=32, policy="turn_around")
    assert ep.rgb.shape == (6, 32, 32, 3) and ep.K.shape == (6, 3, 3)
    assert ep.meta["map"] == "MAP01" and ep.meta["fps"] == pytest.approx(35 / 4)
    yaw = np.array([camera.heading_from_pose(c)[1] for c in ep.c2w])
    assert np.allclose(np.abs(ep.actions[1:, 2]), 72.0)  # 360 degrees over 5 steps
    assert (np.abs(camera.wrap_degrees(np.diff(yaw))) > 20).all()  # every step turned


def test_data_cli_record_is_independent_of_workers(tmp_path, capsys):
    common = ["data", "record", "--engine", "procedural", "--episodes", "2", "--frames", "8",
              "--size", "32", "--policy", "mix", "--seed", "10", "--event-rate", "0.2"]
    assert main(common + ["--workers", "1", "--out", str(tmp_path / "w1")]) == 0
    assert main(common + ["--workers", "2", "--out", str(tmp_path / "w2")]) == 0
    s1, s2 = EpisodeStore(tmp_path / "w1"), EpisodeStore(tmp_path / "w2")
    assert s1.ids() == s2.ids() == ["procedural-000010", "procedural-000011"]
    for i in s1.ids():
        _same(s1.read(i), s2.read(i))
    assert s1.index == s2.index
    capsys.readouterr()
    assert main(["data", "info", "--store", str(tmp_path / "w1")]) == 0
    out = capsys.readouterr().out
    assert "2 episodes, 16 frames" in out and "procedural x2" in out
    assert main(["data", "validate", "--store", str(tmp_path / "w1")]) == 0
    # recording the same seeds again fails before touching the store
    before = (tmp_path / "w1" / "index.json").read_bytes()
    with pytest.raises(ValueError, match="already exists"):
        main(common + ["--workers", "1", "--out", str(tmp_path / "w1")])
    assert (tmp_path / "w1" / "index.json").read_bytes() == before


def test_a_misspelt_map_is_one_line_from_the_shell_and_writes_nothing(tmp_path, capsys,
                                                                     monkeypatch):
    argv = ["data", "record", "--engine", "doom", "--episodes", "1", "--maps", "MAP01,MAP99",
            "--out", str(tmp_path / "s")]
    with pytest.raises(ValueError, match="unknown map 'MAP99' in freedoom2.wad"):
        main(argv)  # what a notebook or a test calling main sees
    assert run(argv) == 2  # what the shell sees: one line naming the value, status 2
    err = capsys.readouterr().err
    assert err.startswith("python -m worldlab: error: unknown map 'MAP99'")
    assert "Traceback" not in err and "WORLDLAB_TRACEBACK=1" in err
    assert not (tmp_path / "s").exists()  # checked before the store's folder is made
    monkeypatch.setenv("WORLDLAB_TRACEBACK", "1")
    with pytest.raises(ValueError, match="MAP99"):
        run(argv)


def test_data_record_takes_its_defaults_from_the_preset(tmp_path):
    """Flags not given come from the preset's data section; a flag given wins."""
    from worldlab.config import make_config
    from worldlab.episodes.cli import record_settings

    cli = build_parser("data")
    args = cli.parse_args(["data", "record", "--preset", "tiny", "--engine", "procedural",
                           "--episodes", "1", "--out", str(tmp_path / "s")])
    tiny = make_config("tiny").data
    assert record_settings(args) == {
        "engine": "procedural", "episodes": 1, "frames": tiny.frames, "size": tiny.size,
        "workers": tiny.workers, "policy": tiny.policy, "event_rate": tiny.event_rate,
        "maps": (tiny.map,), "start": tiny.start, "monsters": tiny.monsters,
        "walls": tiny.walls}
    assert (tiny.map, tiny.start, tiny.monsters, tiny.walls) == ("MAP01", "player", "on", "room")
    flags = cli.parse_args(["data", "record", "--preset", "base", "--start", "player",
                            "--maps", "MAP01,MAP04", "--monsters", "off", "--out", "x"])
    assert {k: record_settings(flags)[k] for k in ("maps", "start", "monsters")} == {
        "maps": ("MAP01", "MAP04"), "start": "player", "monsters": "off"}
    base = record_settings(cli.parse_args(["data", "record", "--preset", "base",
                                           "--map", "MAP02", "--out", "x"]))
    assert (base["maps"], base["start"], base["monsters"]) == (("MAP02",), "random",
                                                               "invulnerable")
    for bad in (["--start", "anywhere"], ["--monsters", "angry"]):
        with pytest.raises(SystemExit):
            cli.parse_args(["data", "record", *bad, "--out", "x"])
    assert main(["data", "record", "--preset", "tiny", "--engine", "procedural",
                 "--episodes", "1", "--out", str(tmp_path / "s")]) == 0
    (entry,) = EpisodeStore(tmp_path / "s").index.values()
    assert entry["frames"] == tiny.frames and entry["size"] == [tiny.size] * 2
    assert entry["event_rate"] == tiny.event_rate


def test_revisit_pairs_on_a_leave_and_return_path():
    traj = camera.leave_and_return(camera.straight(6, 0.3).actions)
    pairs = revisit_pairs(traj.c2w, radius_m=0.01, max_yaw_deg=1.0, min_gap=4)
    # pose 12 - k stands where pose k stood, facing the same way (gap 12 - 2k >= 4)
    assert pairs == [(k, 12 - k) for k in range(5)]
    turned = camera.turn_around(12).c2w  # same place, only the full turn faces the same way
    assert revisit_pairs(turned, radius_m=0.01, max_yaw_deg=1.0, min_gap=4) == [(0, 12)]


def test_dataset_stats(tmp_path):
    store = EpisodeStore(tmp_path)
    for seed, policy in ((0, "leave_and_return"), (1, "turn_around")):
        store.write(record_episode("procedural", seed, 12, 16, policy), f"e{seed}")
    stats = dataset_stats(store, min_gap=4)
    assert stats["actions"].shape == (22, camera.ACTION_WIDTH)
    assert stats["policies"] == {"leave_and_return": 1, "turn_around": 1}
    assert stats["revisited_frames"]["e0"] >= 1  # the return half sees the outbound poses
    assert stats["fields"] == camera.ACTION_FIELDS


class _NoStarts:
    """An engine with only the protocol: no start_options."""

    name, events = "bare", ()

    def reset(self, seed=0, **options):
        raise AssertionError("never reached: the start is checked first")


def test_bad_starts_policies_and_engines_name_the_value():
    with pytest.raises(ValueError, match="unknown start 'anywhere'.*'player', 'random'"):
        record_episode("procedural", 0, 4, 16, "random_walk", start="anywhere")
    with pytest.raises(ValueError, match="unknown policy 'dance'"):
        record_episode("procedural", 0, 4, 16, "dance")
    with pytest.raises(ValueError, match="start 'random' needs.*'bare' has none"):
        record_with(_NoStarts(), 0, 4, "random_walk", start="random")
    with pytest.raises(ValueError, match="map 'MAP01' given, but the 'procedural' engine"):
        record_episode("procedural", 0, 4, 16, "random_walk", map="MAP01")
    with pytest.raises(ValueError, match="maps must be map names.*'MAP01,,MAP02'"):
        main(["data", "record", "--engine", "doom", "--maps", "MAP01,,MAP02", "--out", "x"])


def test_map_of_spreads_seeds_and_policies_over_the_maps():
    from collections import Counter

    from worldlab.engines.policies import MIX_SCHEDULE

    maps = ("MAP01", "MAP02", "MAP03")
    assert [map_of(s, maps) for s in range(4)] == ["MAP01", "MAP02", "MAP03", "MAP01"]
    assert map_of(7, ("MAP05",)) == "MAP05"
    pairs = Counter((MIX_SCHEDULE[s % 10], map_of(s, maps)) for s in range(30))
    assert len(pairs) == len(set(MIX_SCHEDULE)) * len(maps)  # every policy on every map
