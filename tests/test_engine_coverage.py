"""Where a player can be: DOOM's reachable floor, random starts in both engines, the
invulnerable-monsters switch, the training maps, and coverage of a set of positions.

DOOM at 32 px without metric depth except where sectors_info is compared; one engine per
module. The movement rules are checked on a small synthetic map with a known answer.
"""

import math
import re

import numpy as np
import pytest

from worldlab.camera import Action, heading_from_pose
from worldlab.engines import procedural_world as pw
from worldlab.engines.coverage import ReachableArea, coverage, coverage_figure
from worldlab.engines.doom import HELDOUT_MAP, TRAIN_MAPS, DoomEngine, EpisodeFinished
from worldlab.engines.doom_level import (START_CLEARANCE_M, UNITS_PER_M_XY, MapData,
                                         reachable_area, read_map)
from worldlab.engines.procedural import PLAYER_R, ProceduralEngine, _disk_blocked, _walkable

MAP01_START = (-6.0, -6.0)  # (-192, -192) map units
COURTYARD = (916 / UNITS_PER_M_XY, 1214 / UNITS_PER_M_XY)  # behind MAP01's first door


@pytest.fixture(scope="module")
def engine():
    e = DoomEngine(size=32, monsters=False, metric_depth=False)
    yield e
    e.close()


def _yaw_error(a: float, b: float) -> float:
    return abs((a - b + 180.0) % 360.0 - 180.0)


# ----------------------------------------------------------------------------------------
# DOOM's movement rules on a synthetic map: 128-unit square sectors on a grid
# ----------------------------------------------------------------------------------------

# grid cell -> (floor, ceiling, tag); sector ids in this order
ROOMS = {
    (0, 0): (0, 128, 0),  # 0 the player start
    (1, 0): (24, 128, 0),  # 1 a step up of 24: reachable
    (2, 0): (49, 128, 0),  # 2 a step up of 25 from room 1: not
    (-1, 0): (0, 55, 0),  # 3 an opening of 55: not
    (0, 1): (0, 0, 0),  # 4 a closed manual door: passable, no floor to stand on
    (0, 2): (0, 128, 0),  # 5 behind the door: reachable
    (0, -1): (-100, 128, 0),  # 6 a drop of 100: reachable
    (1, -1): (-100, 128, 0),  # 7 beside room 6, across an impassable line: not
    (5, 5): (0, 128, 7),  # 8 apart, tagged 7: a teleport line leads here
}
SPECIAL = {((0, 0), (0, 1)): (1, 0, 0),  # (special, tag, flags) of a shared edge
           ((0, -1), (1, -1)): (0, 0, 1), ((1, 0), (1, -1)): (0, 0, 1),
           ((0, 0), (-1, 0)): (97, 7, 0)}


def _synthetic_map() -> MapData:
    cells = list(ROOMS)
    edges = {}  # undirected edge -> [x1, y1, x2, y2, front, back]
    for sid, (i, j) in enumerate(cells):
        x, y = 128 * i, 128 * j
        for a, b in (((x, y), (x + 128, y)), ((x + 128, y), (x + 128, y + 128)),
                     ((x + 128, y + 128), (x, y + 128)), ((x, y + 128), (x, y))):
            key = tuple(sorted((a, b)))
            if key in edges:
                edges[key][5] = sid
            else:
                edges[key] = [*a, *b, sid, -1]
    specials = {}
    for (c1, c2), value in SPECIAL.items():
        for key, e in edges.items():
            if {e[4], e[5]} == {cells.index(c1), cells.index(c2)}:
                specials[key] = value
    keys = list(edges)
    rows = [edges[k] for k in keys]
    spec = np.array([specials.get(k, (0, 0, 0)) for k in keys], np.int64)
    room = np.array([ROOMS[c] for c in cells], np.float64)
    return MapData(
        lines=np.array([r[:4] for r in rows], np.float64), flags=spec[:, 2],
        special=spec[:, 0], tag=spec[:, 1], sides=np.array([r[4:] for r in rows], np.int64),
        floor=room[:, 0], ceiling=room[:, 1], sector_tag=room[:, 2].astype(np.int64),
        sky=np.zeros(len(cells), bool), things=np.array([[64.0, 64.0, 0.0, 1.0, 7.0]]))


def test_movement_rules_on_a_synthetic_map():
    area = reachable_area(_synthetic_map())
    centre = {c: ((128 * c[0] + 64) / UNITS_PER_M_XY, (128 * c[1] + 64) / UNITS_PER_M_XY)
              for c in ROOMS}
    inside = dict(zip(ROOMS, area.contains([centre[c] for c in ROOMS])))
    assert [c for c in ROOMS if inside[c]] == [(0, 0), (1, 0), (0, 2), (0, -1), (5, 5)]
    assert area.area_m2 == pytest.approx(5 * 16.0)  # five rooms of 4 m x 4 m
    assert area.start_xy == (2.0, 2.0)
    walls = {tuple(sorted(map(tuple, w * UNITS_PER_M_XY))) for w in area.walls}
    assert ((128.0, 0.0), (128.0, 128.0)) not in walls  # the 24-unit step is no wall
    assert ((0.0, 0.0), (128.0, 0.0)) not in walls  # nor the ledge above room 6
    assert ((0.0, 128.0), (128.0, 128.0)) in walls  # the closed door is one


# ----------------------------------------------------------------------------------------
# MAP01's reachable floor
# ----------------------------------------------------------------------------------------


def test_reachable_area_of_map01(engine):
    area = engine.reachable_area()
    assert area is engine.reachable_area("MAP01")  # cached per map
    assert area.start_xy == MAP01_START
    # measured 2810 m^2: the rooms behind doors and lifts too (300 m^2 without them)
    assert 2500 < area.area_m2 < 3100
    assert area.contains([MAP01_START, COURTYARD, (500.0, 500.0)]).tolist() == \
        [True, True, False]
    assert area.wall_distance([MAP01_START])[0] > 0.5


def test_wad_heights_are_the_games_sectors_at_level_start():
    with DoomEngine(size=32, monsters=False) as e:  # metric depth: sectors_info is on
        e.reset(seed=0)
        sectors = e._game.get_state().sectors
    data = read_map(e.wad_path, "MAP01")
    floor = np.array([s.floor_height for s in sorted(sectors, key=lambda s: s.id)])
    ceiling = np.array([s.ceiling_height for s in sorted(sectors, key=lambda s: s.id)])
    np.testing.assert_array_equal(floor, data.floor)
    np.testing.assert_array_equal(ceiling, data.ceiling)


# ----------------------------------------------------------------------------------------
# Sampling
# ----------------------------------------------------------------------------------------


SQUARE = ReachableArea(np.array([[[0, 0], [4, 0], [4, 4]], [[0, 0], [4, 4], [0, 4]]], float),
                       np.array([[[0, 0], [4, 0]], [[4, 0], [4, 4]], [[4, 4], [0, 4]],
                                 [[0, 4], [0, 0]]], float))


def test_sample_is_uniform_clear_and_deterministic():
    pts = SQUARE.sample(np.random.default_rng(0), 4000, clearance_m=0.0)
    assert pts.shape == (4000, 2) and SQUARE.contains(pts).all()
    np.testing.assert_allclose(pts.mean(0), [2.0, 2.0], atol=0.1)
    assert abs((pts[:, 0] < 1.0).mean() - 0.25) < 0.03  # uniform by area
    clear = SQUARE.sample(np.random.default_rng(1), 200, clearance_m=1.0)
    assert clear.min() >= 1.0 and clear.max() <= 3.0
    np.testing.assert_array_equal(clear, SQUARE.sample(np.random.default_rng(1), 200, 1.0))
    with pytest.raises(ValueError, match="clearance_m=2.5"):
        SQUARE.sample(np.random.default_rng(0), 1, clearance_m=2.5)
    with pytest.raises(ValueError, match="rng"):
        SQUARE.sample(0, 1)


def test_doom_start_options(engine):
    area = engine.reachable_area()
    starts = [engine.start_options(seed) for seed in range(6)]
    assert all(set(s) == {"position", "yaw"} for s in starts)
    xy = np.array([s["position"] for s in starts])
    assert area.contains(xy).all() and (area.wall_distance(xy) >= START_CLEARANCE_M).all()
    np.testing.assert_array_equal(xy * UNITS_PER_M_XY, np.round(xy * UNITS_PER_M_XY))
    assert engine.start_options(3) == starts[3]  # the seed alone decides
    assert len({s["position"] for s in starts}) == 6
    assert len({round(s["yaw"]) for s in starts}) == 6
    for seed, s in enumerate(starts[:3]):
        obs = engine.reset(seed, **s)
        pos, yaw, _ = heading_from_pose(obs.c2w)
        np.testing.assert_allclose(pos[:2], s["position"], atol=0.02)
        assert _yaw_error(yaw, s["yaw"]) < 1.0
        moved = engine.step(Action(forward=0.3)).c2w[:2, 3]
        assert np.linalg.norm(moved - pos[:2]) > 0.01  # not stuck in anything


def test_train_and_heldout_maps(engine):
    assert len(set(TRAIN_MAPS)) == len(TRAIN_MAPS) and HELDOUT_MAP not in TRAIN_MAPS
    for name in TRAIN_MAPS + (HELDOUT_MAP,):
        assert engine.reachable_area(name).area_m2 > 2000  # measured 2810 to 4035 m^2
        options = engine.start_options(0, map=name)
        assert options["map"] == name
        obs = engine.reset(0, **options)
        assert engine.map == name
        np.testing.assert_allclose(obs.c2w[:2, 3], options["position"], atol=0.02)
    engine.reset(0, map="MAP01")


def test_bad_starts_raise_and_change_nothing(engine):
    engine.reset(0)
    with pytest.raises(ValueError, match=re.escape("(1000.0, -3.5)")):
        engine.reset(0, position=(1000.0, -3.5))
    wall = engine.reachable_area("MAP02").walls[0].mean(0)  # a point on a wall line
    on_wall = (float(wall[0]), float(wall[1]))
    with pytest.raises(ValueError, match=re.escape(f"{on_wall!r} is 0.00 m from a wall")):
        engine.reset(0, map="MAP02", position=on_wall)
    assert engine.map == "MAP01"  # the failed reset did not switch maps
    for bad in (float("nan"), float("inf"), "north", True):
        with pytest.raises(ValueError, match=re.escape(f"yaw must be a finite number of "
                                                       f"degrees, got {bad!r}")):
            engine.reset(0, yaw=bad)
    with pytest.raises(ValueError, match="seed"):
        engine.start_options(-1)
    with pytest.raises(ValueError, match="MAP99"):
        engine.start_options(0, map="MAP99")
    with pytest.raises(ValueError, match="'maybe'"):
        DoomEngine(size=32, monsters="maybe")
    assert engine.monsters == "off"  # False is "off"


# ----------------------------------------------------------------------------------------
# Invulnerable monsters
# ----------------------------------------------------------------------------------------


def _surrounded(e: DoomEngine, steps: int) -> int:
    """Summon three imps before the player and stand still; the steps survived."""
    e.reset(0)
    for k in range(steps):
        obs = e.step(Action(), "summon an imp" if k in (0, 2, 4) else None)
    assert (obs.instance > 0).any()  # the imps are there
    return steps


def test_invulnerable_player_outlives_summoned_imps():
    with DoomEngine(size=32, monsters=True, metric_depth=False) as e:  # True is "on"
        assert e.monsters == "on"
        with pytest.raises(EpisodeFinished):  # measured: dead at step 41
            _surrounded(e, 150)
    with DoomEngine(size=32, monsters="invulnerable", metric_depth=False) as e:
        for _ in range(2):  # god mode is given again with every episode
            assert _surrounded(e, 150) == 150 and e.variable("HEALTH") == 100


# ----------------------------------------------------------------------------------------
# Coverage
# ----------------------------------------------------------------------------------------


def test_coverage_of_synthetic_positions(engine):
    centres = (np.stack(np.meshgrid(np.arange(8), np.arange(8)), -1).reshape(-1, 2) + 0.5) / 2
    full = coverage(SQUARE, centres, radius_m=0.3, cell_m=0.5)
    assert full == {"share_of_reachable_area": 1.0, "visited_cells": 64,
                    "reachable_cells": 64}
    one = coverage(SQUARE, [(2.0, 2.0)], radius_m=1.0, cell_m=0.5)
    assert one["visited_cells"] == 12 and one["share_of_reachable_area"] == 12 / 64
    with pytest.raises(ValueError, match="empty coverage set"):
        coverage(SQUARE, np.zeros((0, 2)))
    with pytest.raises(ValueError, match="radius_m"):
        coverage(SQUARE, centres, radius_m=0.0)
    area = engine.reachable_area()
    everywhere = area.sample(np.random.default_rng(0), 4000, clearance_m=0.0)
    assert coverage(area, everywhere)["share_of_reachable_area"] > 0.95
    start = coverage(area, [MAP01_START])
    assert start["share_of_reachable_area"] < 0.01
    assert start["reachable_cells"] == pytest.approx(area.area_m2 / 0.25, rel=0.05)


def test_coverage_figure_is_top_down_with_equal_scale():
    fig = coverage_figure(SQUARE, [(1.0, 1.0), (2.0, 3.0)], title="square")
    assert [t.name for t in fig.data] == ["floor", "walls", "visited"]
    assert fig.layout.yaxis.scaleanchor == "x" and fig.layout.title.text == "square"
    assert list(fig.data[2].x) == [1.0, 2.0]


# ----------------------------------------------------------------------------------------
# The procedural engine
# ----------------------------------------------------------------------------------------


def test_procedural_start_options():
    e = ProceduralEngine(size=16)
    starts = [e.start_options(seed) for seed in range(4)]
    assert all(set(s) == {"position", "yaw"} for s in starts)
    assert e.start_options(2) == starts[2] and len({s["position"] for s in starts}) == 4
    for seed, s in enumerate(starts):
        world = pw.build_world(seed)
        assert not _disk_blocked(_walkable(world, [None] * len(world.doors)), *s["position"],
                                 PLAYER_R)
        pos, yaw, _ = heading_from_pose(e.reset(seed, **s).c2w)
        np.testing.assert_allclose(pos[:2], s["position"])
        assert _yaw_error(yaw, s["yaw"]) < 1e-6
    with pytest.raises(ValueError, match="seed"):
        e.start_options(2 ** 32)
    assert math.isfinite(e.step(Action(forward=0.2)).c2w[0, 3])


def test_area_from_grid_known_answers_and_bad_input():
    from worldlab.engines.coverage import area_from_grid

    g = np.zeros((3, 4), bool)
    g[1, 1:3] = True  # two cells side by side: [0.5, 1.5] x [0.5, 1.0] with cell 0.5, x0 0
    a = area_from_grid(g, 0.0, 0.5, start_xy=(0.75, 0.75))
    assert a.area_m2 == pytest.approx(0.5)
    assert len(a.walls) == 6  # 2 below, 2 above, 1 left, 1 right
    assert a.contains(np.array([[0.6, 0.7], [1.4, 0.9], [0.4, 0.7]])).tolist() == \
        [True, True, False]
    for bad, match in ((np.zeros((2, 2), bool), "a free cell"),
                       (np.ones((2, 2), int), "bool grid")):
        with pytest.raises(ValueError, match=match):
            area_from_grid(bad, 0.0, 1.0)
    with pytest.raises(ValueError, match="cell must be"):
        area_from_grid(g, 0.0, 0.0)
