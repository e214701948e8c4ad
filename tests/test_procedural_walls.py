"""The procedural engine's `walls` option: "room" (the default, unchanged) and "segment" (a
material per straight wall segment and posters per room, the same geometry), from the
world to the recording CLI and the store's metadata."""

from pathlib import Path

import numpy as np
import pytest

from worldlab import camera
from worldlab.camera import Action
from worldlab.cli import build_parser, main
from worldlab.config import WALLS, make_config
from worldlab.engines import make_engine
from worldlab.engines import procedural_world as pw
from worldlab.engines.procedural import ProceduralEngine
from worldlab.episodes import EpisodeStore
from worldlab.episodes.recording import record_episode

ROOT = Path(__file__).resolve().parents[1]
SIZE = 32
WALK = [Action(forward=0.25, yaw=20.0), Action(forward=0.25, right=0.1),
        Action(yaw=-45.0, pitch=5.0), Action(forward=0.3)] * 4
PROMPTS = {1: "summon a monster", 5: "cast a fireball", 9: "open the door"}


def _play(engine, seed, **reset):
    obs = [engine.reset(seed, **reset)]
    return obs + [engine.step(a, PROMPTS.get(k)) for k, a in enumerate(WALK)]


def _wall_tris(world, rect) -> np.ndarray:
    """Indices of the mesh triangles of the walls around `rect` (x0, y0, x1, y1): vertical
    floor-to-ceiling triangles on one of its four sides."""
    verts, tris, _ = world.mesh
    v = verts[tris]  # (f, 3 corners, 3)
    x0, y0, x1, y1 = rect
    full = (v[..., 2].min(1) == 0) & (v[..., 2].max(1) == pw.WALL_H)
    in_x = (v[..., 0] >= x0).all(1) & (v[..., 0] <= x1).all(1)
    in_y = (v[..., 1] >= y0).all(1) & (v[..., 1] <= y1).all(1)
    on_x = ((v[..., 0] == x0).all(1) | (v[..., 0] == x1).all(1)) & in_y
    on_y = ((v[..., 1] == y0).all(1) | (v[..., 1] == y1).all(1)) & in_x
    return np.flatnonzero(full & (on_x | on_y))


def test_the_default_is_room_and_unchanged():
    """No option is walls="room", frame for frame; and it still renders the episodes shipped
    in data/samples/procedural, recorded before the option existed."""
    default, room = ProceduralEngine(size=SIZE), ProceduralEngine(size=SIZE, walls="room")
    assert default.walls == room.walls == "room"
    for a, b in zip(_play(default, 3), _play(room, 3)):
        for key in ("rgb", "depth", "c2w", "instance"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    store = EpisodeStore.open(ROOT / "data" / "samples" / "procedural")
    for i in store.ids():
        old = store.read(i)
        m = old.meta
        new = record_episode("procedural", m["seed"], len(old), m["size"],
                             m["policy"].removesuffix("+events"), m["event_rate"])
        np.testing.assert_allclose(new.c2w, old.c2w, atol=1e-9)
        np.testing.assert_allclose(new.depth, old.depth, rtol=1e-5)  # open3d builds: ULPs
        np.testing.assert_array_equal(new.instance, old.instance)
        # the same colours (exactly, where the sample was checked; a depth that differs
        # by an ULP may tip a texel elsewhere)
        assert np.mean(new.rgb == old.rgb) > 0.999, i
        assert new.meta["walls"] == "room"


def test_segment_walls_are_a_pure_function_of_the_seed():
    a, b = pw.build_world(5, walls="segment"), pw.build_world(5, walls="segment")
    for key in a.materials:
        np.testing.assert_array_equal(a.materials[key], b.materials[key])
    for key in a.posters:
        np.testing.assert_array_equal(a.posters[key], b.posters[key])
    oa = _play(ProceduralEngine(size=SIZE, walls="segment"), 5)
    ob = _play(ProceduralEngine(size=SIZE, walls="segment"), 5)
    for x, y in zip(oa, ob):
        for key in ("rgb", "depth", "c2w", "instance"):
            np.testing.assert_array_equal(getattr(x, key), getattr(y, key))
    other = pw.build_world(6, walls="segment")
    assert not np.array_equal(a.materials["a"][-10:], other.materials["a"][-10:])


def test_segment_walls_change_colours_only():
    """The same seed and walk give the same geometry, depth, poses, instance ids, events and
    characters in view with either option; only the colours differ."""
    room, seg = pw.build_world(2), pw.build_world(2, walls="segment")
    for r, s in zip(room.mesh[:2], seg.mesh[:2]):
        np.testing.assert_array_equal(r, s)
    np.testing.assert_array_equal(room.free, seg.free)
    assert (room.rooms, room.doors, room.spawn, room.characters) == \
        (seg.rooms, seg.doors, seg.spawn, seg.characters)
    m = len(room.materials["pattern"])  # segment walls only add materials, after the others
    for key in room.materials:
        np.testing.assert_array_equal(room.materials[key], seg.materials[key][:m])
    engines = {w: ProceduralEngine(size=SIZE, walls=w) for w in WALLS}
    start = engines["room"].start_options(2)
    assert start == engines["segment"].start_options(2)
    walks = {w: _play(e, 2, **start) for w, e in engines.items()}
    for a, b in zip(walks["room"], walks["segment"]):
        for key in ("depth", "c2w", "instance"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
        assert a.things == b.things and a.events == b.events
    differs = [np.abs(a.rgb.astype(int) - b.rgb).mean() for a, b in zip(*walks.values())]
    assert min(differs) > 3


@pytest.mark.parametrize("seed", [0, 7])
def test_every_room_has_walls_that_differ(seed):
    """With "room" a room's walls share one material; with "segment" each of its wall
    segments has its own, of another look (pattern or colour) than the others."""
    room, seg = pw.build_world(seed), pw.build_world(seed, walls="segment")
    for rect in room.rooms:
        tris = _wall_tris(room, rect)
        assert len(tris) >= 8 and len(set(room.mesh[2][tris].tolist())) == 1
        mats = sorted(set(seg.mesh[2][tris].tolist()))
        assert len(mats) == len(tris) // 2  # a quad (two triangles) per segment
        looks = {(int(seg.materials["pattern"][k]), *seg.materials["a"][k].round(3))
                 for k in mats}
        assert len(looks) == len(mats) >= 4


def _facing(world, k, distance=1.8):
    """(room index, (x, y, yaw) standing `distance` m in front of poster k's centre and
    facing it, the wall's coordinate across it)."""
    verts, tris, tri_mat = world.mesh
    axis = world.posters["axis"][k]
    line = verts[tris[tri_mat == world.posters["on"][k]]][0, 0, 1 - axis]
    lo, hi = world.posters["rect"][k][:2]
    xy = np.array([(lo + hi) / 2, line] if axis == 0 else [line, (lo + hi) / 2], float)
    room = next(r for r, (x0, y0, x1, y1) in enumerate(world.rooms)  # whose side it is
                if x0 <= xy[0] <= x1 and y0 <= xy[1] <= y1)
    inward = np.zeros(2)
    inward[1 - axis] = 1.0 if line == world.rooms[room][1 - axis] else -1.0
    x, y = xy + distance * inward
    return room, (x, y, float(np.degrees(np.arctan2(-inward[1], -inward[0])))), line


def test_every_room_has_distinct_posters_and_they_show_on_their_walls():
    world = pw.build_world(4, walls="segment")
    P = world.posters
    assert len(set(P["on"].tolist())) == len(P["on"])  # one poster per wall segment
    per_room = {}
    for k in range(len(P["mat"])):
        per_room.setdefault(_facing(world, k)[0], []).append(int(P["mat"][k]))
    assert sorted(per_room) == list(range(len(world.rooms)))
    for mats in per_room.values():  # a room's posters: as many as asked, unlike each other
        assert len(mats) == pw.POSTERS
        assert len({int(world.materials["pattern"][m]) for m in mats}) == pw.POSTERS
    e = ProceduralEngine(size=64, characters=False, walls="segment")
    shown = 0
    for k in range(len(P["mat"])):
        _, (x, y, yaw), line = _facing(world, k)
        try:
            with_poster = e.reset(4, position=(x, y), yaw=yaw)
        except ValueError:  # a prop stands there
            continue
        rect = e.world.posters["rect"].copy()
        rect[k] = (1.0, 0.0, 1.0, 0.0)  # an empty rectangle: poster k is gone, no other
        e.world.posters = {**e.world.posters, "rect": rect}
        bare = e.step(Action())
        changed = (with_poster.rgb != bare.rgb).any(-1)
        # where each pixel's ray hits: inside poster k's rectangle on its wall?
        dirs = camera.ray_directions(e.K, e.c2w, 64, 64, normalize=False)[1]
        p = e.c2w[:3, 3] + bare.depth[..., None] * dirs  # (h, w, 3)
        axis = P["axis"][k]
        lo, hi, z0, z1 = P["rect"][k]
        along, z, across = p[..., axis], p[..., 2], p[..., 1 - axis]

        def inside(margin):
            return (np.abs(across - line) < 1e-3) & (lo - margin <= along) & \
                (along <= hi + margin) & (z0 - margin <= z) & (z <= z1 + margin)

        assert not (changed & ~inside(1e-3)).any()  # the poster is only where it hangs
        assert changed.sum() > 0.9 * inside(-1e-3).sum() > 20
        np.testing.assert_array_equal(with_poster.depth, bare.depth)  # paint, not geometry
        shown += 1
    assert shown >= len(P["mat"]) // 2


def test_a_bad_walls_value_is_named():
    expected = r"walls must be one of \('room', 'segment'\), got 'stripes'"
    with pytest.raises(ValueError, match=expected):
        ProceduralEngine(walls="stripes")
    with pytest.raises(ValueError, match=expected):
        make_engine("procedural", walls="stripes")
    with pytest.raises(ValueError, match=expected):
        pw.build_world(0, walls="stripes")
    with pytest.raises(ValueError, match=r"walls must be one of .*got None"):
        ProceduralEngine(walls=None)
    with pytest.raises(ValueError, match=r"data\.walls must be one of"):
        make_config("tiny", data__walls="stripes")
    with pytest.raises(SystemExit):
        build_parser("data").parse_args(["data", "record", "--walls", "stripes", "--out", "x"])
    with pytest.raises(ValueError, match="--walls is a procedural option; the engine is 'doom'"):
        main(["data", "record", "--engine", "doom", "--walls", "segment", "--out", "x"])


def test_data_record_with_segment_walls_says_so(tmp_path):
    """`data record --walls segment` records them, and the episode meta, the store index,
    store.describe() and the config of a world trained on the store say so."""
    from worldlab.train.recipes import trained_on

    common = ["data", "record", "--preset", "tiny", "--engine", "procedural", "--episodes",
              "1", "--frames", "4", "--size", "16", "--policy", "random_walk"]
    assert main(common + ["--walls", "segment", "--out", str(tmp_path / "seg")]) == 0
    assert main(common + ["--out", str(tmp_path / "room")]) == 0
    seg, room = EpisodeStore(tmp_path / "seg"), EpisodeStore(tmp_path / "room")
    (i,) = seg.ids()
    assert seg.read(i).meta["walls"] == "segment" and seg.index[i]["walls"] == "segment"
    assert room.read(i).meta["walls"] == "room" and room.index[i]["walls"] == "room"
    assert seg.describe()["walls"] == "segment" and seg.validate_all() == {}
    assert trained_on(make_config("tiny"), seg, seg.ids()).data.walls == "segment"
    a, b = seg.read(i), room.read(i)
    np.testing.assert_array_equal(a.depth, b.depth)
    np.testing.assert_array_equal(a.c2w, b.c2w)
    assert not np.array_equal(a.rgb, b.rgb)
