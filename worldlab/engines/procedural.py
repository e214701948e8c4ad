"""The procedural engine: seeded rooms, props and characters, ray-cast with open3d.

`ProceduralEngine(size=64)` renders a world from `procedural_world.build_world(seed)`:
nine rooms with their own textured looks joined by corridors, props, lamps, and characters
of three kinds (imp, robot, slime) walking circles. Frames are ray-cast with
`open3d.t.geometry.RaycastingScene`: the static world is one scene built at reset (and
rebuilt only when a door opens); moving things (characters, summoned monsters, fireballs,
opening doors) go into a small scene built each step from the ones in view, and only the
rays of their screen rectangle are cast against it.

`walls` chooses how walls look (`procedural_world.WALLS`): "room" (the default), one
material for all of a room's walls; "segment", a material per straight wall segment and a
few posters per room, so no wall tells another's look (a testbed for memory). Both options
give the same geometry, so the same seed and actions give the same depth, poses and
instance ids; only colours differ. Posters are painted on their walls at the hit point
(`_paint_posters`), so they add no triangles.

Prompt -> event mapping (`EVENTS`, matched by `base.match_event`, first match wins;
keywords are case-insensitive substrings):

- summon_monster ("summon", "monster", "spawn"): a character of the next kind (imp, robot,
  slime in turn) appears up to 3 m ahead, in view, and turns slowly in place.
- fireball ("fireball", "cast", "spell"): a glowing ball leaves the camera along the view
  direction at 0.6 m per step, lighting the walls it passes, until it hits a wall.
- lights_out ("lights out", "lights off", "darkness", "turn off the light"): ambient, key
  light and lamps off (emissive things still glow).
- lights_on ("lights on", "light up", "turn on the light"): lights back on.
- open_door ("open the door", "open door", "door"): the nearest closed door slides up into
  the ceiling (0.5 m per step) and stops blocking the corridor at once.

Buttons do the same without a prompt: `attack` casts a fireball, `use` opens the nearest
door; they are reported as events too (text "attack" / "use").

Player: eye 1.5 m above the floor, radius 0.3 m; moves with `camera.step_pose` (turn, then
move) in sub-steps of at most 0.2 m and slides along walls (x or y alone) when the full
move is blocked. Pitch is limited to +-60 degrees, like a game's view limit.

Instance ids (`Observation.instance`): 0 static world (walls, floors, props, closed doors),
1..n characters, 64 + k door k while it opens, 128 + k the k-th summoned monster or fireball;
`Observation.things` names the kind (`character_kinds`) of each character in view.

Shading: texture (fixed to world coordinates) x (ambient + Lambert key light + lamp and
fireball point lights), emissive materials unlit, then exponential distance fog.
Depth is exact z-depth: rays have unit z in the camera frame, so open3d's t_hit is depth.

Speed (`python -m worldlab bench engines`, one core): the static cast is about half of a
256 px frame, so the rest is kept lean: textures are one lookup in precomputed tiles
(`procedural_world.texture_tiles`) and a per-material palette; moving things are cached
shapes in their own frames (a new open3d scene costs ~1 ms at its first cast, whatever its
size) hit by only the rays that enter their bounding spheres, moved there by the inverse
rigid motion (which keeps t); component-major (3, k) arrays and `np.take` for gathers.

Shape names: n rays/pixels, h w height width, m materials, l lights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ._open3d import open3d as o3d

from .. import camera
from ..camera import Action
from .base import START_STREAM, Event, EventSpec, Observation, match_event
from .coverage import ReachableArea, area_from_grid
from . import procedural_world as pw

EVENTS = (
    EventSpec("summon_monster", ("summon", "monster", "spawn"), "a character appears in view"),
    EventSpec("fireball", ("fireball", "cast", "spell"), "a glowing ball flies off ahead"),
    EventSpec("lights_out", ("lights out", "lights off", "darkness", "turn off the light"),
              "the lights go out"),
    EventSpec("lights_on", ("lights on", "light up", "turn on the light"),
              "the lights come back on"),
    EventSpec("open_door", ("open the door", "open door", "door"),
              "the nearest closed door slides open"),
)
BUTTON_EVENTS = {"attack": "fireball", "use": "open_door"}

EYE_H = 1.5  # metres above the floor
PLAYER_R = 0.3  # collision radius (m)
SUBSTEP = 0.2  # longest collision sub-step (m): thinner than any wall or door
MAX_PITCH = 60.0  # degrees
FOG_M = 16.0  # fog e-folding distance (m)
FOG_RGB = np.array([0.06, 0.06, 0.08], np.float32)
SUN = np.array([0.45, 0.3, 0.84], np.float32) / np.linalg.norm([0.45, 0.3, 0.84])
FIREBALL_SPEED = 0.6  # metres per step
FIREBALL_STEPS = 40  # lifetime
DOOR_LIFT = 0.5  # metres per step
LIGHT_RANGE = 5.0  # point lights reach exactly this far (m): windowed falloff, no popping


@dataclass
class _Spawned:
    """A summoned monster (kind set) or a fireball (kind None), created at `step0`."""

    id: int
    kind: str | None
    origin: np.ndarray  # (3,) floor point of a monster, start of a fireball
    velocity: np.ndarray  # (3,) metres per step (zero for monsters)
    yaw: float
    step0: int


@dataclass
class _Moving:
    """A moving thing this step: shape `shape` (a `_shape` key) turned by `yaw` degrees
    about +z and placed at `position`; bounding sphere (centre, radius); optional light."""

    id: int
    shape: tuple
    position: np.ndarray
    yaw: float
    centre: np.ndarray
    radius: float
    light: np.ndarray | None = None


class ProceduralEngine:
    """Deterministic ray-cast rooms (see the module docstring)."""

    name = "procedural"
    events = EVENTS
    character_kinds = pw.KINDS  # the kinds of `Observation.things`

    def __init__(self, size: int = 64, fov_deg: float = 90.0, characters: bool = True,
                 fog: bool = True, threads: int = 1, walls: str = "room"):
        if not (isinstance(size, (int, np.integer)) and 8 <= size <= 2048):
            raise ValueError(f"size must be an integer in [8, 2048] pixels, got {size!r}")
        if not (isinstance(threads, int) and threads >= 0):
            raise ValueError(f"threads must be an int >= 0 (0 = all cores), got {threads!r}")
        self.walls = pw.check_walls(walls)  # recording's meta reads it
        self.size, self.threads = int(size), threads
        self.characters, self.fog = bool(characters), bool(fog)
        self.K = camera.intrinsics_from_fov(self.size, self.size, fov_deg)
        # (n, 3) camera-frame ray directions with unit z: t_hit is then z-depth
        self._dirs_cam = camera.ray_directions(self.K, np.eye(4), self.size, self.size,
                                               normalize=False)[1].reshape(-1, 3)
        self._dirs_cam = self._dirs_cam.astype(np.float32)
        self.world: pw.Level | None = None

    # ------------------------------------------------------------------------------------
    # Protocol
    # ------------------------------------------------------------------------------------

    def reset(self, seed: int = 0, **options) -> Observation:
        """Build the world of `seed`; options: position=(x, y) metres, yaw, pitch degrees."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) \
                or not 0 <= seed < 2 ** 32:
            raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
        _check_reset_options(options)
        world = pw.build_world(int(seed), walls=self.walls)
        x, y, yaw = world.spawn
        x, y = (float(v) for v in options.get("position", (x, y)))
        pitch = float(options.get("pitch", 0.0))
        door_open = [None] * len(world.doors)  # step at which each door opened
        if _disk_blocked(_walkable(world, door_open), float(x), float(y)):
            raise ValueError(f"reset position {(x, y)} is inside a wall or prop of seed {seed}")
        # all checks passed: only now replace the state
        self.world, self._t, self._lights, self._door_open = world, 0, True, door_open
        self._palette = pw.palette(world.materials)  # (3, m * levels) texture colours
        self._poster_of = _poster_index(world)  # (m,) material -> poster on it, -1 none
        self._shapes: dict[tuple, tuple] = {}  # moving shapes in their own frames
        self._spawned: list[_Spawned] = []
        self._build_static()
        self._pitch = pitch
        self.c2w = camera.pose_from_heading(np.array([x, y, EYE_H], float),
                                            float(options.get("yaw", yaw)), pitch)
        return self._observe([])

    def reachable_area(self) -> ReachableArea:
        """The current world's floor and walls, top-down in metres (its occupancy grid; doors
        and props not subtracted): what the minimap draws."""
        if self.world is None:
            raise ValueError("reachable_area needs a world: call reset(seed) first")
        x, y, _ = self.world.spawn
        return area_from_grid(self.world.free, pw.X0, pw.CELL, start_xy=(x, y))

    def start_options(self, seed: int) -> dict:
        """Reset options {"position": (x, y), "yaw": degrees} of a random start in the world
        of `seed`, drawn from `seed` alone: uniform over its walkable floor (props and closed
        doors excluded) where the player's disk touches nothing, at any heading:
        `reset(seed, **start_options(seed))`."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) \
                or not 0 <= seed < 2 ** 32:
            raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
        world = pw.build_world(int(seed))
        walk = _walkable(world, [None] * len(world.doors))
        cells = np.argwhere(walk)  # (c, 2) row = y, col = x: uniform cell, then uniform in it
        rng = np.random.default_rng([START_STREAM, int(seed)])
        for _ in range(1000):
            row, col = cells[rng.integers(len(cells))]
            x, y = pw.X0 + (np.array([col, row]) + rng.random(2)) * pw.CELL
            if not _disk_blocked(walk, x, y):
                return {"position": (float(x), float(y)),
                        "yaw": float(rng.uniform(-180.0, 180.0))}
        raise RuntimeError(f"no walkable point of seed {seed} clears the player's radius "
                           f"{PLAYER_R} m in 1000 tries")

    def step(self, action: Action, prompt: str | None = None) -> Observation:
        if self.world is None:
            raise RuntimeError("call reset(seed) before step()")
        if not isinstance(action, Action):
            raise ValueError(f"action must be a worldlab.camera.Action, got "
                             f"{type(action).__name__} {action!r}")
        if prompt is not None and not isinstance(prompt, str):
            raise ValueError(f"prompt must be a string or None, got {type(prompt).__name__}")
        self._t += 1
        self._move(action)
        fired = []
        spec = match_event(prompt, EVENTS)
        if spec is not None:
            fired.append(Event(spec.name, prompt, self._t))
        fired += [Event(BUTTON_EVENTS[b], b, self._t) for b in sorted(action.buttons)
                  if b in BUTTON_EVENTS]
        for ev in fired:
            self._apply(ev.name)
        self._expire_fireballs()
        return self._observe(fired)

    def close(self) -> None:
        self.world = None
        self._static = None

    # ------------------------------------------------------------------------------------
    # Player movement and collision
    # ------------------------------------------------------------------------------------

    def _blocked(self, x: float, y: float, radius: float = PLAYER_R) -> bool:
        return _disk_blocked(self._walk, x, y, radius)

    def _move(self, action: Action) -> None:
        want = camera.step_pose(self.c2w, Action(action.forward, action.right, action.yaw))
        goal, yaw, _ = camera.heading_from_pose(want)
        pos = self.c2w[:3, 3].copy()
        delta = goal - pos
        n = max(1, math.ceil(np.linalg.norm(delta[:2]) / SUBSTEP))
        for _ in range(n):  # slide along walls: try the full sub-step, then x, then y
            for d in (delta / n, delta / n * [1, 0, 0], delta / n * [0, 1, 0]):
                if not self._blocked(pos[0] + d[0], pos[1] + d[1]):
                    pos = pos + d
                    break
        self._pitch = float(np.clip(self._pitch + action.pitch, -MAX_PITCH, MAX_PITCH))
        self.c2w = camera.pose_from_heading(pos, yaw, self._pitch)

    # ------------------------------------------------------------------------------------
    # Events
    # ------------------------------------------------------------------------------------

    def _apply(self, name: str) -> None:
        pos, yaw, pitch = camera.heading_from_pose(self.c2w)
        new_id = 128 + len(self._spawned)
        if name == "summon_monster":
            kind = pw.KINDS[sum(s.kind is not None for s in self._spawned) % len(pw.KINDS)]
            ahead = np.array([math.cos(math.radians(yaw)), math.sin(math.radians(yaw)), 0])
            dist = 1.0  # walk out until the monster would touch a wall, at most 3 m
            while dist < 3.0 and not self._blocked(*(pos + (dist + 0.25) * ahead)[:2], 0.45):
                dist += 0.25
            foot = pos + dist * ahead - [0, 0, EYE_H]
            self._spawned.append(_Spawned(new_id, kind, foot, np.zeros(3), yaw + 180, self._t))
        elif name == "fireball":
            fwd, down = self.c2w[:3, 2], self.c2w[:3, 1]
            start = pos + 0.7 * fwd + 0.25 * down
            self._spawned.append(_Spawned(new_id, None, start, FIREBALL_SPEED * fwd, yaw,
                                          self._t))
        elif name in ("lights_out", "lights_on"):
            self._lights = name == "lights_on"
        elif name == "open_door":
            closed = [k for k, o in enumerate(self._door_open) if o is None]
            if closed:
                centres = [np.mean(np.reshape(self.world.doors[k], (2, 2)), 0) for k in closed]
                k = closed[int(np.argmin([np.linalg.norm(c - pos[:2]) for c in centres]))]
                self._door_open[k] = self._t
                self._build_static()

    def _expire_fireballs(self) -> None:
        """Drop fireballs that hit a wall, left the room height, or burnt out."""
        keep = []
        for s in self._spawned:
            if s.kind is None:
                p = s.origin + s.velocity * (self._t - s.step0)
                if (self._t - s.step0 > FIREBALL_STEPS or not 0.1 < p[2] < pw.WALL_H - 0.1
                        or self._blocked(p[0], p[1], 0.1)):
                    continue
            keep.append(s)
        self._spawned = keep

    def door_view(self, k: int, distance: float = 2.0) -> tuple[float, float, float]:
        """(x, y, yaw) standing `distance` m before door k on its corridor, facing it."""
        if self.world is None:
            raise RuntimeError("call reset(seed) before door_view()")
        if not (isinstance(k, int) and 0 <= k < len(self.world.doors)):
            raise ValueError(f"door index must be an int in [0, {len(self.world.doors)}), "
                             f"got {k!r}")
        x0, y0, x1, y1 = self.world.doors[k]
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        if x1 - x0 < y1 - y0:  # a door across an east-west corridor
            return cx - distance, cy, 0.0
        return cx, cy - distance, 90.0

    # ------------------------------------------------------------------------------------
    # Scenes
    # ------------------------------------------------------------------------------------

    def _build_static(self) -> None:
        """Static scene: the world mesh plus every closed door (rebuilt when a door opens)."""
        w = self.world
        parts = [w.mesh] + [pw.box((d[0], d[1], 0), (d[2], d[3], pw.WALL_H), w.door_mat)
                            for d, o in zip(w.doors, self._door_open) if o is None]
        verts, tris, self._static_mat = pw.merge(parts)
        self._static = _scene(verts, tris)
        self._walk = _walkable(w, self._door_open)

    def _dynamic(self) -> list[_Moving]:
        """The moving things now, each a cached local shape placed by a rigid motion."""
        w, t, out = self.world, self._t, []
        if self.characters:
            for k, ch in enumerate(w.characters):
                foot, yaw = ch.pose(t)
                out.append(_Moving(1 + k, ("character", ch.kind), foot, yaw,
                                   foot + [0, 0, 0.75], pw.CHARACTER_RADIUS))
        for k, (d, opened) in enumerate(zip(w.doors, self._door_open)):
            lift = DOOR_LIFT * (t - opened + 1) if opened is not None else pw.WALL_H
            if lift < pw.WALL_H:
                lo, hi = np.array([d[0], d[1], lift]), np.array([d[2], d[3], pw.WALL_H + lift])
                out.append(_Moving(64 + k, ("door", k), lo, 0.0, (lo + hi) / 2,
                                   np.linalg.norm(hi - lo) / 2))
        for s in self._spawned:
            age = t - s.step0
            if s.kind is not None:
                out.append(_Moving(s.id, ("character", s.kind), s.origin, s.yaw + 4.0 * age,
                                   s.origin + [0, 0, 0.75], pw.CHARACTER_RADIUS))
            else:
                p = s.origin + s.velocity * age
                out.append(_Moving(s.id, ("fireball",), p, 0.0, p, 0.2, light=p))
        return out

    def _shape(self, key: tuple) -> tuple[o3d.t.geometry.RaycastingScene, np.ndarray]:
        """(scene, per-triangle material) of a moving shape in its own frame, built once:
        a scene's first cast builds its BVH, which costs ~1 ms even for 100 triangles."""
        if key not in self._shapes:
            w = self.world
            if key[0] == "character":
                verts, tris, mat = pw.character_mesh(key[1], w.kind_mats, (0, 0, 0), 0.0)
            elif key[0] == "door":
                d = w.doors[key[1]]
                verts, tris, mat = pw.box((0, 0, 0), (d[2] - d[0], d[3] - d[1], pw.WALL_H),
                                          w.door_mat)
            else:
                verts, tris, mat = pw.sphere((0, 0, 0), 0.15, w.fire_mat)
            self._shapes[key] = (_scene(verts, tris), mat)
        return self._shapes[key]

    # ------------------------------------------------------------------------------------
    # Rendering
    # ------------------------------------------------------------------------------------

    def _observe(self, events: list[Event]) -> Observation:
        n = self.size * self.size
        R, o = self.c2w[:3, :3], self.c2w[:3, 3]
        rays = np.empty((n, 6), np.float32)  # (n, 6) origin, direction with unit z-depth
        rays[:, :3] = o
        np.matmul(self._dirs_cam, R.T.astype(np.float32), out=rays[:, 3:])
        hit = self._static.cast_rays(o3d.core.Tensor(rays), nthreads=self.threads)
        depth = hit["t_hit"].numpy().copy()  # (n,) z-depth, inf on a miss
        normal = hit["primitive_normals"].numpy().copy()  # (n, 3)
        found = np.isfinite(depth)
        prim = np.where(found, hit["primitive_ids"].numpy(), 0)
        mat = np.where(found, self._static_mat.take(prim), -1)  # (n,)
        self._paint_posters(rays, depth, mat)
        inst = np.zeros(n, np.int32)
        lights = self._cast_dynamic(rays, depth, normal, mat, inst)
        rgb = self._shade(rays, depth, normal, mat, lights)
        hw = (self.size, self.size)
        seen = set(np.unique(inst).tolist())
        things = {m.id: m.shape[1] for m in self._dynamic()
                  if m.shape[0] == "character" and m.id in seen}
        return Observation(rgb.reshape(*hw, 3), depth.reshape(hw), self.c2w.copy(),
                           self.K.copy(), self._t, inst.reshape(hw), events, things)

    def _paint_posters(self, rays, depth, mat) -> None:
        """Give static hits inside a poster's rectangle on its wall the poster's material
        (in place; `procedural_world._poster_arrays`). Depth stays the bare wall's."""
        posters = self.world.posters
        if not len(posters["mat"]):
            return
        on = np.where(mat >= 0, self._poster_of.take(np.maximum(mat, 0)), -1)  # (n,)
        idx = np.flatnonzero(on >= 0)  # hits on a wall that carries a poster
        k = on.take(idx)  # (j,) its poster
        p = rays[idx, :3] + depth[idx, None] * rays[idx, 3:]  # (j, 3) world hit points
        along = np.where(posters["axis"].take(k) == 0, p[:, 0], p[:, 1])
        lo, hi, z0, z1 = posters["rect"].take(k, axis=0).T
        inside = (lo <= along) & (along <= hi) & (z0 <= p[:, 2]) & (p[:, 2] <= z1)
        mat[idx[inside]] = posters["mat"].take(k[inside])

    def _cast_dynamic(self, rays, depth, normal, mat, inst) -> list[np.ndarray]:
        """Overlay the moving things in view onto the static hits (in place).

        Only rays that pass through a thing's bounding sphere are cast (found inside its
        screen rectangle), moved into the thing's own frame (a rigid motion keeps t) and
        cast against its cached shape. Returns the positions of moving point lights.
        """
        objs = self._dynamic()
        o = rays[0, :3]
        for obj in objs:
            r = _screen_rect(obj.centre, obj.radius, self.c2w, self.K, self.size)
            if r is None:
                continue
            idx = _rays_into_sphere(r, self.K, self.c2w, self.size, obj.centre, obj.radius)
            if not len(idx):
                continue
            scene, tri_mat = self._shape(obj.shape)
            rot = pw.yaw_rotation(obj.yaw)  # local -> world
            local = np.empty((len(idx), 6), np.float32)
            local[:, :3] = (o - np.asarray(obj.position, np.float32)) @ rot
            local[:, 3:] = rays[idx, 3:] @ rot
            hit = scene.cast_rays(o3d.core.Tensor(local), nthreads=self.threads)
            t = hit["t_hit"].numpy()
            near = t < depth[idx]
            sel, prim = idx[near], hit["primitive_ids"].numpy()[near]
            depth[sel] = t[near]
            normal[sel] = hit["primitive_normals"].numpy()[near] @ rot.T
            mat[sel], inst[sel] = tri_mat[prim], obj.id
        return [obj.light for obj in objs if obj.light is not None]

    def _shade(self, rays, depth, normal, mat, lights) -> np.ndarray:
        """(n, 3) uint8: texture x lighting (emissive unlit), then fog; misses are fog.

        Works component-major, (3, k) arrays, so every numpy op runs over contiguous rows.
        """
        found = np.isfinite(depth)
        every = found.all()  # indoors nearly every ray hits: skip the gathers then
        pick = (lambda x: x) if every else (lambda x: x[found])
        d = np.ascontiguousarray(pick(rays[:, 3:]).T)  # (3, k) directions, unit z-depth
        z = pick(depth)  # (k,)
        p = rays[0, :3, None] + z * d  # (3, k) world hit points (one origin per frame)
        nrm = np.ascontiguousarray(pick(normal).T)  # (3, k)
        facing = nrm[0] * d[0] + nrm[1] * d[1] + nrm[2] * d[2]  # (k,) > 0: seen from behind
        nrm *= np.where(facing > 0, np.float32(-1), np.float32(1))  # face the camera
        m, M = pick(mat), self.world.materials
        tex = pw.texture(p, nrm, m, M, self._palette)  # (3, k)
        col = tex * self._lighting(p, nrm, lights)  # (3, k)
        emissive = M["emissive"].take(m)
        if emissive.any():
            col[:, emissive] = tex[:, emissive]
        if self.fog:
            f = np.exp(z * np.float32(-1.0 / FOG_M))  # (k,)
            col -= FOG_RGB[:, None]
            col *= f
            col += FOG_RGB[:, None]
        np.clip(col, 0, 1, out=col)
        col *= 255
        col += 0.5
        out = np.empty((3, len(depth)), np.uint8)
        if every:
            out[:] = col
        else:
            out[:] = (FOG_RGB * 255 + 0.5).astype(np.uint8)[:, None]
            out[:, found] = col
        return out.T

    def _lighting(self, p, nrm, moving) -> np.ndarray:
        """Light at hit points p (3, k) with camera-facing normals nrm (3, k): (k,) white
        when no coloured light reaches the points, else (3, k)."""
        on = self._lights
        if on:
            light = 0.4 * np.maximum(SUN @ nrm, 0)  # (k,) key light
            light += np.float32(0.35)  # ambient
        else:
            light = np.full(p.shape[1], 0.04, np.float32)
        lo, hi = p.min(1), p.max(1)  # a light further than its range from this box is dark
        for sources, rgb in (((self.world.lamps if on else ()), LAMP_RGB), (moving, FIRE_RGB)):
            near = [q for q in sources
                    if np.linalg.norm(np.clip(q, lo, hi) - q) < LIGHT_RANGE]
            if near:
                light = light + _point_lights(p, nrm, near) * rgb[:, None]  # -> (3, k)
        return light


def _point_lights(p, nrm, sources) -> np.ndarray:
    """(k,) summed point lights at points p (3, k): Lambert x soft inverse-square falloff,
    windowed to reach exactly LIGHT_RANGE so culling far lights changes nothing."""
    total = np.zeros(p.shape[1], np.float32)
    for q in sources:
        v = np.asarray(q, np.float32)[:, None] - p  # (3, k) towards the light
        d2 = (v * v).sum(0)
        window = np.maximum(1 - d2 * np.float32(1 / LIGHT_RANGE ** 2), 0)
        total += np.maximum((nrm * v).sum(0), 0) * window / (np.sqrt(d2) * (1 + 0.25 * d2))
    return total


# ----------------------------------------------------------------------------------------
# Helpers: scenes and screen rectangles
# ----------------------------------------------------------------------------------------

LAMP_RGB = np.array([1.0, 0.85, 0.6], np.float32)
FIRE_RGB = np.array([2.0, 1.0, 0.3], np.float32)


def _check_reset_options(options: dict) -> None:
    unknown = sorted(set(options) - {"position", "yaw", "pitch"})
    if unknown:
        raise ValueError(f"unknown reset option {unknown[0]!r}; expected position, yaw, pitch")
    for key in ("yaw", "pitch"):
        v = options.get(key, 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) \
                or not math.isfinite(v):
            raise ValueError(f"{key} must be a finite number of degrees, got {v!r}")
    if abs(options.get("pitch", 0.0)) > MAX_PITCH:
        raise ValueError(f"pitch must be within +-{MAX_PITCH} degrees, got {options['pitch']!r}")
    if "position" in options:
        pos = np.asarray(options["position"])
        if pos.shape != (2,) or not np.issubdtype(pos.dtype, np.number) \
                or not np.isfinite(pos).all():
            raise ValueError(f"position must be a finite (x, y) in metres, "
                             f"got {options['position']!r}")


def _poster_index(world: pw.Level) -> np.ndarray:
    """(m,) the poster on the walls of each material, -1 where none: with walls="segment"
    every wall segment has a material of its own, so the material names the wall."""
    index = np.full(len(world.materials["pattern"]), -1, np.int64)
    index[world.posters["on"]] = np.arange(len(world.posters["on"]))
    return index


def _walkable(world: pw.Level, door_open: list) -> np.ndarray:
    """(NCELLS, NCELLS) bool: floor without props and closed doors."""
    ok = world.free.copy()
    for door, opened in zip(world.doors, door_open):
        if opened is None:
            ok[pw.cells(door)] = False
    return ok


def _disk_blocked(walk: np.ndarray, x: float, y: float, radius: float = PLAYER_R) -> bool:
    """Whether a disk at (x, y) touches a cell that is not walkable (or leaves the grid)."""
    i0, i1 = (int(math.floor((v - pw.X0) / pw.CELL)) for v in (x - radius, x + radius))
    j0, j1 = (int(math.floor((v - pw.X0) / pw.CELL)) for v in (y - radius, y + radius))
    if min(i0, j0) < 0 or max(i1, j1) >= pw.NCELLS:
        return True
    return not walk[j0:j1 + 1, i0:i1 + 1].all()


def _scene(verts: np.ndarray, tris: np.ndarray) -> o3d.t.geometry.RaycastingScene:
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.core.Tensor(np.ascontiguousarray(verts, np.float32)),
                        o3d.core.Tensor(np.ascontiguousarray(tris, np.uint32)))
    return scene


def _rays_into_sphere(rect, K, c2w, size: int, centre, radius: float) -> np.ndarray:
    """Flat indices of the pixels in `rect` (r0, r1, c0, c1) whose rays pass within
    `radius` of `centre` (all of them when the camera is inside the sphere): exact, so no
    ray that could hit a mesh inside the sphere is dropped. Works in the camera frame, where
    pixel (r, c) looks along (a_c, b_r, 1): separable, so no per-pixel ray is gathered."""
    r0, r1, c0, c1 = rect
    idx = (np.arange(r0, r1)[:, None] * size + np.arange(c0, c1)).ravel()
    v = (np.asarray(centre, float) - c2w[:3, 3]) @ c2w[:3, :3]  # (3,) centre, camera frame
    vv = float(v @ v)
    if vv <= radius * radius:
        return idx
    a = (np.arange(c0, c1) + 0.5 - K[0, 2]) / K[0, 0]  # (cols,)
    b = (np.arange(r0, r1) + 0.5 - K[1, 2]) / K[1, 1]  # (rows,)
    dv = (b * v[1] + v[2])[:, None] + a * v[0]  # (rows, cols) d . v
    dd = (b * b + 1)[:, None] + a * a  # (rows, cols) |d|^2
    # squared distance from the centre to the ray's line, times |d|^2, against radius^2
    return idx[((dv > 0) & (dv * dv >= dd * (vv - radius * radius))).ravel()]


def _screen_rect(centre, radius, c2w, K, size) -> tuple | None:
    """Pixel rows/cols (r0, r1, c0, c1) that a sphere can cover, or None if out of view."""
    x, y, z = (np.asarray(centre, float) - c2w[:3, 3]) @ c2w[:3, :3]  # camera frame
    if z + radius <= 0:
        return None
    if z - radius <= 0.05:  # the camera is at or inside the sphere
        return 0, size, 0, size
    # x'/z' over the sphere's bounding box is extreme at its corners
    us = [K[0, 0] * a / b + K[0, 2] for a in (x - radius, x + radius)
          for b in (z - radius, z + radius)]
    vs = [K[1, 1] * a / b + K[1, 2] for a in (y - radius, y + radius)
          for b in (z - radius, z + radius)]
    c0, c1 = max(0, math.floor(min(us))), min(size, math.ceil(max(us)))
    r0, r1 = max(0, math.floor(min(vs))), min(size, math.ceil(max(vs)))
    return (r0, r1, c0, c1) if c0 < c1 and r0 < r1 else None
