"""Recording over the whole level: random starts follow the seed, the players that come back
do so from anywhere in both engines, explore goes farther than random_walk, and `data
record` sends the seeds of a DOOM recording round its maps."""

import re

import numpy as np
import pytest

from worldlab.cli import main
from worldlab.config import MONSTERS, make_config
from worldlab.engines import make_engine
from worldlab.episodes import EpisodeStore
from worldlab.episodes.recording import (record_episode, record_many, record_with,
                                         revisit_pairs)

SIZE = 32


def _revisited(episode) -> int:
    """Frames that see a place again: within 0.5 m and 30 degrees of a frame 8+ before."""
    return len({j for _, j in revisit_pairs(episode.c2w)})


def _same(a, b) -> None:
    for k in ("rgb", "depth", "c2w", "actions"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    strip = lambda m: {k: v for k, v in m.items() if k != "created"}  # noqa: E731
    assert strip(a.meta) == strip(b.meta)


def test_random_starts_follow_the_seed_whatever_the_worker_count(tmp_path):
    eps = [record_episode("procedural", s, 6, SIZE, "random_walk", start="random")
           for s in (0, 1, 2)]
    assert all(e.meta["start"] == "random" for e in eps)
    assert len({tuple(e.meta["start_pose"]) for e in eps}) == 3
    player = record_episode("procedural", 0, 6, SIZE, "random_walk")
    assert player.meta["start"] == "player" and not np.allclose(player.c2w[0], eps[0].c2w[0])
    _same(eps[0], record_episode("procedural", 0, 6, SIZE, "random_walk", start="random"))
    stores = [EpisodeStore(tmp_path / f"w{w}") for w in (1, 2)]
    for workers, store in zip((1, 2), stores):
        record_many(store, "procedural", [0, 1, 2], 6, SIZE, "mix", workers=workers,
                    start="random")
    for i in stores[0].ids():
        _same(stores[0].read(i), stores[1].read(i))
    _same(stores[0].read("procedural-000000"),
          record_episode("procedural", 0, 6, SIZE, "mix", start="random"))


@pytest.mark.parametrize("policy", ["asymmetric_return", "leave_and_return"])
def test_players_come_back_from_random_starts_procedural(policy):
    episodes = [record_episode("procedural", s, 48, SIZE, policy, start="random")
                for s in range(4)]
    # measured: 15-23 revisited frames of 48 for asymmetric_return, 22+ for the other
    assert all(_revisited(e) >= 8 for e in episodes), [_revisited(e) for e in episodes]
    actions = [e.actions for e in episodes]  # the seed changes the path, not only the start
    assert all(not np.allclose(a, b) for a, b in zip(actions, actions[1:]))


def test_players_come_back_from_random_starts_doom():
    from worldlab.engines.doom import TRAIN_MAPS

    with make_engine("doom", size=SIZE, monsters="invulnerable") as engine:
        for policy in ("asymmetric_return", "leave_and_return"):
            for k, map_name in enumerate(TRAIN_MAPS):
                ep = record_with(engine, k, 64, policy, start="random", map=map_name)
                assert ep.meta["map"] == map_name and ep.meta["ended"] is None
                assert _revisited(ep) >= 8, (policy, map_name, _revisited(ep))
        # from the player start too, two seeds walk two paths
        a, b = (record_with(engine, s, 24, "asymmetric_return", map="MAP01") for s in (0, 1))
        # a seed's episode does not depend on what the engine played before: the loop's
        # last one again
        again = record_with(engine, 2, 64, "leave_and_return", start="random", map="MAP03")
    assert np.allclose(a.c2w[0], b.c2w[0]) and not np.allclose(a.c2w, b.c2w)
    _same(ep, again)


def test_explore_goes_farther_than_random_walk():
    """Measured on the procedural rooms from the same random starts, 127 steps each."""
    reach, engine = {}, make_engine("procedural", size=SIZE)
    for policy in ("explore", "random_walk"):
        for seed in range(10, 16):
            xy = record_with(engine, seed, 128, policy, start="random").c2w[:, :2, 3]
            cells = len({tuple(c) for c in np.floor(xy / 2).astype(int)})  # 2 m cells
            reach.setdefault(policy, []).append(
                (cells, np.linalg.norm(xy - xy[0], axis=1).max()))
    explore, walk = (np.mean(reach[p], axis=0) for p in ("explore", "random_walk"))
    # measured: 15.3 against 11.7 cells visited, 12.5 against 6.8 m the farthest out
    assert explore[0] > 1.15 * walk[0] and explore[1] > 1.5 * walk[1], (explore, walk)


def test_data_record_sends_doom_seeds_round_the_maps(tmp_path):
    out = tmp_path / "doom"
    assert main(["data", "record", "--engine", "doom", "--episodes", "2", "--frames", "6",
                 "--size", str(SIZE), "--policy", "explore", "--start", "random",
                 "--maps", "MAP01,MAP02", "--monsters", "invulnerable", "--workers", "1",
                 "--no-metric-depth", "--out", str(out)]) == 0
    store = EpisodeStore(out)
    metas = [store.read(i).meta for i in store.ids()]
    assert [m["map"] for m in metas] == ["MAP01", "MAP02"]
    assert all(m["start"] == "random" and m["ended"] is None for m in metas)
    # what the world recipe writes into a trained world's data section validates
    assert make_config("small", data__map=store.describe()["map"]).data.map == "MAP01+MAP02"


def test_data_config_checks_the_recording_fields():
    from worldlab.engines.doom import MONSTERS as DOOM_MONSTERS

    assert MONSTERS is DOOM_MONSTERS  # spelled once, in the config
    for field, bad, why in (("start", "anywhere", "one of"), ("monsters", "angry", "one of"),
                            ("map", "MAP01++MAP02", "map names joined by")):
        with pytest.raises(ValueError, match=f"data.{field} must be {why}.*{re.escape(bad)}"):
            make_config("tiny", **{f"data__{field}": bad})


def test_level_coverage_of_a_store_per_map(tmp_path):
    """The notebook's coverage report: positions grouped by the map each episode played."""
    from worldlab.engines.coverage import coverage
    from worldlab.episodes import level_coverage

    store = EpisodeStore(tmp_path / "s")
    record_many(store, "doom", [0, 1], 12, 32, "explore", maps=("MAP01", "MAP02"),
                start="random", monsters="invulnerable")
    with make_engine("doom", size=32) as doom:
        levels = level_coverage(store, doom)
    with pytest.raises(ValueError, match="empty coverage set"):
        coverage(next(iter(levels.values()))["area"], np.zeros((0, 2)))
    assert set(levels) <= {"MAP01", "MAP02"} and levels
    for level in levels.values():
        assert 0 < level["share_of_reachable_area"] < 0.2  # 12 steps see little of a map
        assert level["positions"].shape[1] == 2
    proc = make_engine("procedural", size=32)
    try:
        with pytest.raises(ValueError, match="no reachable area"):
            level_coverage(store, proc)
    finally:
        proc.close()


def test_a_world_trained_on_random_starts_says_so(tmp_path):
    """store.describe() (what the world recipe writes into world_config.json) carries the
    start kind and the monster mode the episodes were recorded with."""
    from worldlab.train.recipes import trained_on

    store = EpisodeStore(tmp_path / "s")
    record_many(store, "doom", [0, 1], 8, 32, "random_walk", start="random",
                monsters="invulnerable")
    described = store.describe()
    assert (described["start"], described["monsters"]) == ("random", "invulnerable")
    cfg = trained_on(make_config("tiny"), store, store.ids())
    assert (cfg.data.start, cfg.data.monsters, cfg.data.episodes) == ("random", "invulnerable", 2)
