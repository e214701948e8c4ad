"""The procedural engine: determinism, collision, events, geometry, bad input."""

import math

import numpy as np
import pytest

from worldlab import camera
from worldlab.camera import Action
from worldlab.engines import make_engine, match_event
from worldlab.engines import procedural_world as pw
from worldlab.engines.base import Engine
from worldlab.engines.procedural import EVENTS, PLAYER_R, ProceduralEngine
from worldlab.memory.cache3d import PointCache, reprojection_error

SIZE = 32
WALK = [Action(forward=0.2, yaw=3.0), Action(forward=0.3, right=0.1), Action(yaw=-10.0),
        Action(forward=0.25, pitch=5.0), Action(forward=0.2, buttons={"attack"})] * 3


def _play(engine, seed, actions, prompts=None):
    obs = [engine.reset(seed)]
    for k, a in enumerate(actions):
        obs.append(engine.step(a, (prompts or {}).get(k)))
    return obs


def test_protocol_shapes_and_z_depth():
    e = make_engine("procedural", size=SIZE)
    assert isinstance(e, Engine) and e.name == "procedural"
    obs = e.reset(0)
    obs.validate()
    assert obs.rgb.shape == (SIZE, SIZE, 3) and obs.instance.dtype == np.int32
    # facing a closed door head on, the door is a fronto-parallel plane: constant z-depth
    x, y, yaw = e.door_view(0, distance=2.0)
    obs = e.reset(0, position=(x, y), yaw=yaw)
    centre = obs.depth[SIZE // 2 - 4:SIZE // 2 + 4, SIZE // 2 - 2:SIZE // 2 + 2]
    np.testing.assert_allclose(centre, 2.0 - pw.CELL / 2, rtol=1e-5)
    np.testing.assert_allclose(obs.c2w[:3, 3], [x, y, 1.5])


def test_same_seed_and_actions_replay_bit_identically():
    prompts = {2: "summon a monster", 6: "cast a fireball", 9: "lights out"}
    a = _play(ProceduralEngine(size=SIZE), 5, WALK, prompts)
    b = _play(ProceduralEngine(size=SIZE), 5, WALK, prompts)
    for oa, ob in zip(a, b):
        np.testing.assert_array_equal(oa.rgb, ob.rgb)
        np.testing.assert_array_equal(oa.depth, ob.depth)
        np.testing.assert_array_equal(oa.c2w, ob.c2w)
        np.testing.assert_array_equal(oa.instance, ob.instance)
    assert [ev.name for o in a for ev in o.events] == \
        ["summon_monster", "fireball", "fireball", "lights_out", "fireball", "fireball"]


def test_different_seeds_give_different_worlds():
    e = ProceduralEngine(size=SIZE)
    o1, o2 = e.reset(1), e.reset(2)
    assert np.abs(o1.rgb.astype(int) - o2.rgb.astype(int)).mean() > 5
    assert pw.build_world(1).rooms != pw.build_world(2).rooms


def test_layout_is_connected_with_at_least_four_rooms():
    w = pw.build_world(3)
    assert len(w.rooms) >= 4 and len(w.doors) >= 1
    # flood fill the walkable grid (doors count as open) from the spawn: every room reached
    free = w.free.copy()
    for d in w.doors:
        free[pw.cells(d)] = True
    start = tuple(int((v - pw.X0) / pw.CELL) for v in (w.spawn[1], w.spawn[0]))
    seen, todo = np.zeros_like(free), [start]
    while todo:
        j, i = todo.pop()
        if 0 <= j < free.shape[0] and 0 <= i < free.shape[1] and free[j, i] and not seen[j, i]:
            seen[j, i] = True
            todo += [(j + 1, i), (j - 1, i), (j, i + 1), (j, i - 1)]
    for room in w.rooms:
        assert seen[pw.cells(room)].any()


def _inside_free(world, pos, radius):
    sl = pw.cells((pos[0] - radius, pos[1] - radius, pos[0] + radius, pos[1] + radius))
    return world.free[sl].all()


@pytest.mark.parametrize("yaw_offset", [0.0, 25.0])
def test_walking_into_a_wall_never_crosses_it(yaw_offset):
    e = ProceduralEngine(size=SIZE, characters=False)
    obs = e.reset(4)
    _, yaw, _ = camera.heading_from_pose(obs.c2w)
    obs = e.reset(4, yaw=round(yaw / 90) * 90 + yaw_offset)  # face a wall, or glance off it
    positions = [obs.c2w[:3, 3]]
    for _ in range(60):
        obs = e.step(Action(forward=0.5))
        positions.append(obs.c2w[:3, 3])
        assert obs.depth[SIZE // 2, SIZE // 2] > PLAYER_R * 0.9
    for p, q in zip(positions[:-1], positions[1:]):
        for f in np.linspace(0, 1, 6):  # the path between steps stays clear too
            assert _inside_free(e.world, p + f * (q - p), PLAYER_R * 0.99)
    if yaw_offset == 0:  # head on, the player ends up stuck against the wall
        np.testing.assert_array_equal(positions[-1], positions[-2])


@pytest.mark.parametrize("text, name", [
    ("Summon a monster!", "summon_monster"), ("cast a fireball", "fireball"),
    ("lights out", "lights_out"), ("lights on please", "lights_on"),
    ("open the door", "open_door"), ("walk on", None)])
def test_prompt_to_event_mapping(text, name):
    spec = match_event(text, EVENTS)
    assert (spec.name if spec else None) == name


def test_summon_monster_appears_in_view():
    e = ProceduralEngine(size=SIZE, characters=False)
    before = e.reset(6)
    after = e.step(Action(), "summon a monster")
    assert not (before.instance > 0).any()
    ids = set(np.unique(after.instance)) - {0}
    assert ids == {128} and (after.instance == 128).sum() > 10
    assert after.events[0].name == "summon_monster" and after.events[0].step == 1


def _world_space_render(e: ProceduralEngine):
    """Depth and instance ids by brute force: every ray against one scene holding the static
    world and every moving thing built in world coordinates (no culling, no cached shapes)."""
    import open3d as o3d

    w, parts, ids = e.world, [], []
    for obj in e._dynamic():
        if obj.shape[0] == "character":
            parts.append(pw.character_mesh(obj.shape[1], w.kind_mats, obj.position, obj.yaw))
        elif obj.shape[0] == "door":
            d = w.doors[obj.shape[1]]
            size = np.array([d[2] - d[0], d[3] - d[1], pw.WALL_H])
            parts.append(pw.box(obj.position, obj.position + size, w.door_mat))
        else:
            parts.append(pw.sphere(obj.position, 0.15, w.fire_mat))
        ids.append(np.full(len(parts[-1][1]), obj.id))
    static = [pw.box((d[0], d[1], 0), (d[2], d[3], pw.WALL_H), w.door_mat)
              for d, o in zip(w.doors, e._door_open) if o is None]
    verts, tris, _ = pw.merge([w.mesh] + static + parts)
    tri_id = np.concatenate([np.zeros(len(tris) - sum(map(len, ids)), int)] + ids)
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.core.Tensor(verts.astype(np.float32)),
                        o3d.core.Tensor(tris.astype(np.uint32)))
    dirs = camera.ray_directions(e.K, e.c2w, e.size, e.size, normalize=False)[1]
    rays = np.concatenate([np.broadcast_to(e.c2w[:3, 3], dirs.shape), dirs], -1)
    hit = scene.cast_rays(o3d.core.Tensor(rays.reshape(-1, 6).astype(np.float32)))
    depth = hit["t_hit"].numpy().reshape(e.size, e.size)
    return depth, tri_id[np.minimum(hit["primitive_ids"].numpy(), len(tri_id) - 1)].reshape(
        depth.shape)


def test_moving_things_render_as_in_world_space():
    # cached shapes moved by rigid motions + bounding-sphere culling == the brute force
    e = ProceduralEngine(size=SIZE)
    e.reset(6)
    prompts = ["summon a monster", None, "cast a fireball", "summon a monster", None]
    for p in prompts:
        obs = e.step(Action(yaw=7.0), p)
        depth, inst = _world_space_render(e)
        assert len(set(np.unique(obs.instance)) - {0}) >= 1
        np.testing.assert_allclose(obs.depth, depth, rtol=1e-4, atol=1e-4)
        assert np.mean(obs.instance == inst) > 0.999  # ties on silhouettes may differ


def test_character_meshes_fit_their_bounding_sphere():
    for kind in pw.KINDS:
        verts, _, _ = pw.character_mesh(kind, {k: (0, 0) for k in pw.KINDS}, (0, 0, 0), 0.0)
        assert np.linalg.norm(verts - [0, 0, 0.75], axis=1).max() < pw.CHARACTER_RADIUS


def test_fireball_glows_and_flies_away():
    e = ProceduralEngine(size=SIZE, characters=False)
    e.reset(0)
    x, y, yaw = e.door_view(0, distance=4.0)  # a clear corridor ahead
    e.reset(0, position=(x, y), yaw=yaw)
    depths = []
    for k in range(4):
        obs = e.step(Action(), "cast a fireball" if k == 0 else None)
        ball = obs.instance == 128
        assert ball.any()
        depths.append(np.median(obs.depth[ball]))
        assert obs.rgb[ball][:, 0].mean() > 200  # glowing orange
    assert np.all(np.diff(depths) > 0.4)


def test_lights_out_darkens_and_lights_on_restores():
    e = ProceduralEngine(size=SIZE, characters=False)
    lit = e.reset(7)
    dark = e.step(Action(), "lights out")
    assert dark.rgb.mean() < 0.5 * lit.rgb.mean()
    np.testing.assert_array_equal(dark.depth, lit.depth)
    back = e.step(Action(), "lights on")
    np.testing.assert_array_equal(back.rgb, lit.rgb)


def test_open_the_door_clears_the_doorway():
    e = ProceduralEngine(size=SIZE, characters=False)
    e.reset(0)
    x, y, yaw = e.door_view(0)
    closed = e.reset(0, position=(x, y), yaw=yaw)
    c = SIZE // 2
    for _ in range(10):  # a closed door blocks the player
        e.step(Action(forward=0.5))
    moved = np.linalg.norm(e.c2w[:3, 3] - closed.c2w[:3, 3])
    assert 2.0 - pw.CELL / 2 - PLAYER_R - 0.2 < moved <= 2.0 - pw.CELL / 2 - PLAYER_R
    e.reset(0, position=(x, y), yaw=yaw)
    sliding = e.step(Action(), "open the door")
    assert (sliding.instance == 64).any()
    for _ in range(6):
        opened = e.step(Action())
    assert opened.depth[c, c] > closed.depth[c, c] + 1.0 and not (opened.instance == 64).any()
    for _ in range(10):  # and now the doorway lets the player through
        e.step(Action(forward=0.5))
    assert np.linalg.norm(e.c2w[:3, 3] - closed.c2w[:3, 3]) > 4.0


def test_frames_agree_about_the_static_world():
    e = ProceduralEngine(size=48, characters=True, fog=True)
    acts = [Action(forward=0.15, right=0.05 * math.sin(k), yaw=4.0 * math.cos(k / 3))
            for k in range(16)]
    for seed in (0, 2):
        obs = _play(e, seed, acts)
        for i, gap in [(0, 3), (2, 5), (4, 8), (8, 6)]:
            oi, oj = obs[i], obs[i + gap]
            r = reprojection_error(oi, oj, exclude=oi.instance != 0)
            assert r["covisible"] > 0.1
            assert r["median"] < 8, (seed, i, gap, r)


def test_turn_around_fuses_into_a_self_consistent_point_cache():
    e = ProceduralEngine(size=64, characters=False)
    traj = camera.turn_around(24)
    obs = [e.reset(8)] + [e.step(a) for a in traj.actions]
    cache = PointCache(voxel=0.02)
    for o in obs:
        cache.fuse(o.rgb, o.depth, o.c2w, o.K)
    n = len(cache)
    cache.fuse(obs[0].rgb, obs[0].depth, obs[0].c2w, obs[0].K)
    assert len(cache) == n  # a revisited view adds nothing
    rel = []
    for o in obs[::4]:
        _, depth, mask = cache.render(o.c2w, o.K, 64, 64)
        assert mask.mean() > 0.3
        rel.append(np.abs(depth[mask] - o.depth[mask]) / o.depth[mask])
    assert np.median(np.concatenate(rel)) < 0.01


def test_bad_input_raises_naming_it():
    e = ProceduralEngine(size=SIZE)
    for seed in (-1, 2 ** 32, "3", 1.5, True):
        with pytest.raises(ValueError, match="seed"):
            e.reset(seed)
    with pytest.raises(RuntimeError, match="reset"):
        e.step(Action())
    e.reset(0)
    with pytest.raises(ValueError, match="action"):
        e.step({"forward": 1.0})
    with pytest.raises(ValueError, match="prompt"):
        e.step(Action(), prompt=3)
    with pytest.raises(ValueError, match="colour"):
        e.reset(0, colour="red")
    e.step(Action(forward=0.3))
    before = e.c2w.copy()
    for bad in ({"position": (-5.0, -5.0)}, {"position": (1.0,)}, {"yaw": "north"},
                {"pitch": 80.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            e.reset(1, **bad)
    np.testing.assert_array_equal(e.c2w, before)  # a failed reset leaves the state alone
    assert e.step(Action()).step == 2
    with pytest.raises(ValueError, match="size"):
        ProceduralEngine(size=4)
