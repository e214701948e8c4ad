"""The seeded world of the procedural engine: layout, meshes, materials, characters.

`build_world(seed)` lays out rooms on a 3 x 3 grid (8 m apart, each 4.5-6.5 m a side),
joins them by a random spanning tree of 1.5 m wide corridors (so every room is reachable)
plus two extra corridors closed by sliding doors, and furnishes every room with a lamp and
a few props (pillars, crates, spheres on pedestals). Every room has its own wall and floor
material (palette + pattern: stripes, checks, bricks or value noise, computed from the hit
point's world coordinates by `texture`, so patterns stick to the geometry and show
parallax). Everything is a pure function of the seed.

`build_world(seed, walls=...)` chooses how walls look (`WALLS`, from `config`):

- "room" (the default): every wall of a room shares the room's material, as above; the
  corridors share one brick material.
- "segment": every straight wall segment (one quad of `_walls`: a run of wall between
  corners and door openings) has a material of its own, and each room has `POSTERS`
  posters of its own hue and pattern hung on its longer walls, so a wall's look cannot be
  told from the others of its room: a model knows it only by having seen it. The segments'
  materials and the posters are drawn from a random stream of their own
  (`[WALLS_STREAM, seed]`), so layout, props, characters and spawn, and with them every
  triangle of the mesh, are those of "room": depth, poses and instance ids are the same,
  only colours differ. A poster is a material painted on a rectangle of its wall
  (`Level.posters`, applied by the renderer at the hit point), not geometry.

Geometry is metres, +z up, floor at z = 0, ceiling at `WALL_H`. A 2D occupancy grid of
`CELL`-metre cells holds what is walkable; walls are generated from its boundary, so door
openings are wherever a corridor meets a room.

Characters (`KINDS`) have a fixed shape and colour per kind (their identity) and walk a
circle around the centre of their room: their pose is a function of the seed and the step.

Shape names: n points/pixels, v vertices, f triangles.
"""

from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from ._open3d import open3d as o3d

from ..config import WALLS

CELL = 0.25  # occupancy grid resolution (m); every layout coordinate is a multiple of it
WALL_H = 3.0  # ceiling height (m)
PITCH = 8.0  # distance between room centres (m)
GRID = 3  # rooms per side
CORRIDOR_W = 1.5  # corridor width (m)
X0 = -1.0  # world coordinate of the occupancy grid's first cell edge (both axes)
NCELLS = int(round((GRID * PITCH - 2 * X0) / CELL))  # grid cells per side

PATTERNS = ("flat", "stripes", "checks", "bricks", "noise")

WALLS_STREAM = 0x3A115  # the first seed word of the segment walls' random stream
GOLDEN = 0.618033988749895  # hue step between a room's wall segments, and its posters
POSTERS = 3  # posters per room with walls="segment" (fewer if it has fewer long walls)
POSTER_WALL = 1.5  # m: the shortest wall segment a poster hangs on

# ----------------------------------------------------------------------------------------
# Materials
# ----------------------------------------------------------------------------------------


@dataclass
class Materials:
    """A growing table of materials; per-triangle material ids index into it."""

    pattern: list[int] = field(default_factory=list)  # index into PATTERNS
    a: list[tuple] = field(default_factory=list)  # base colour, 0-1 RGB
    b: list[tuple] = field(default_factory=list)  # second colour of the pattern
    scale: list[float] = field(default_factory=list)  # pattern period (m)
    emissive: list[bool] = field(default_factory=list)  # shines by itself: no shading

    def add(self, pattern: str, a, b=None, scale: float = 1.0, emissive: bool = False) -> int:
        self.pattern.append(PATTERNS.index(pattern))
        self.a.append(tuple(a))
        self.b.append(tuple(a if b is None else b))
        self.scale.append(float(scale))
        self.emissive.append(bool(emissive))
        return len(self.pattern) - 1

    def arrays(self) -> dict:
        return {"pattern": np.array(self.pattern, np.int32),
                "a": np.array(self.a, np.float32), "b": np.array(self.b, np.float32),
                "scale": np.array(self.scale, np.float32),
                "emissive": np.array(self.emissive, bool)}


def _hsv(h: float, s: float, v: float) -> tuple:
    return colorsys.hsv_to_rgb(h % 1.0, s, v)


def _room_materials(mats: Materials, rng: np.random.Generator) -> tuple[int, int, int]:
    """(wall, floor, ceiling) materials of one room: a hue, two patterns, two shades."""
    hue = rng.uniform()
    wall_pat, floor_pat = rng.choice(PATTERNS[1:], size=2, replace=False)
    wall = mats.add(wall_pat, _hsv(hue, 0.55, 0.85), _hsv(hue + 0.06, 0.65, 0.45),
                    scale=rng.uniform(0.6, 1.2))
    floor = mats.add(floor_pat, _hsv(hue + 0.5, 0.35, 0.7), _hsv(hue + 0.45, 0.4, 0.35),
                     scale=rng.uniform(0.7, 1.4))
    ceiling = mats.add("noise", _hsv(hue, 0.15, 0.8), _hsv(hue, 0.2, 0.6), scale=1.5)
    return wall, floor, ceiling


# ----------------------------------------------------------------------------------------
# Procedural textures: computed from world coordinates, so they stick to the geometry
# ----------------------------------------------------------------------------------------

TILE_CELLS = 16  # a texture repeats every TILE_CELLS pattern periods along each axis
TEXELS = 32  # texels per pattern period
LEVELS = 16  # shades between a material's colour a (0) and b (LEVELS - 1)
_TILE = TILE_CELLS * TEXELS  # texels per tile side, a power of two
_OFFSET = 64.0  # m: shifts world coordinates positive so int truncation is a floor


def _hash01(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """A fixed integer hash of lattice points, periodic in TILE_CELLS -> [0, 1] float32."""
    i, j = i.astype(np.int64) % TILE_CELLS, j.astype(np.int64) % TILE_CELLS
    h = (i * 73856093 ^ j * 19349663) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * 1274126177) & 0xFFFFFFFF
    return ((h ^ (h >> 16)) & 0xFFFF).astype(np.float32) / 65535.0


def _stripes(u, v):
    return (u - np.floor(u) >= 0.5).astype(np.float32)


def _checks(u, v):
    return ((np.floor(u) + np.floor(v)) % 2).astype(np.float32)


def _bricks(u, v):
    row = np.floor(2 * v)  # bricks are half as tall as long; odd rows shift half a brick
    uu = u + 0.5 * (row % 2)
    mortar = (uu - np.floor(uu) < 0.08) | (2 * v - row < 0.14)
    return np.where(mortar, 1.0, 0.35 * _hash01(np.floor(uu), row)).astype(np.float32)


def _noise(u, v):
    """Smooth value noise: hashed lattice values, smoothstep-interpolated."""
    i, j = np.floor(u), np.floor(v)
    fu, fv = u - i, v - j
    fu, fv = fu * fu * (3 - 2 * fu), fv * fv * (3 - 2 * fv)
    top = _hash01(i, j) * (1 - fu) + _hash01(i + 1, j) * fu
    bot = _hash01(i, j + 1) * (1 - fu) + _hash01(i + 1, j + 1) * fu
    return (top * (1 - fv) + bot * fv).astype(np.float32)


_PATTERN_FNS = {"flat": lambda u, v: np.zeros_like(u), "stripes": _stripes,
                "checks": _checks, "bricks": _bricks, "noise": _noise}


@lru_cache(maxsize=None)
def texture_tiles() -> np.ndarray:
    """(patterns * _TILE * _TILE,) uint8 shade levels: every pattern sampled at texel
    centres over one tile (the patterns are periodic in it), flattened for one gather."""
    c = (np.arange(_TILE, dtype=np.float64) + 0.5) / TEXELS
    u, v = np.meshgrid(c, c)  # (tile, tile): u along columns, v along rows
    tiles = [np.rint(_PATTERN_FNS[name](u, v) * (LEVELS - 1)) for name in PATTERNS]
    return np.stack(tiles).astype(np.uint8).ravel()


def palette(materials: dict) -> np.ndarray:
    """(3, m * LEVELS) colours: material k's shade level l at column k * LEVELS + l."""
    w = np.linspace(0, 1, LEVELS, dtype=np.float32)[None, :, None]  # (1, levels, 1)
    a, b = materials["a"][:, None], materials["b"][:, None]  # (m, 1, 3)
    return np.ascontiguousarray((a + (b - a) * w).reshape(-1, 3).T)


def texture(p, nrm, m, materials: dict, pal: np.ndarray) -> np.ndarray:
    """(3, k) texture colour of material ids m (k,) at world points p (3, k), fixed to the
    geometry, looked up in `texture_tiles` and the material palette `pal` (`palette`).

    The texture plane follows the dominant normal axis: floors and ceilings use (x, y),
    walls facing x use (y, z), walls facing y use (x, z).
    """
    an = np.abs(nrm)
    flat, xwall = an[2] > 0.7, an[0] >= an[1]
    texels = np.float32(TEXELS) / materials["scale"].take(m)  # (k,) texels per metre
    s = np.where(flat | ~xwall, p[0], p[1]) + np.float32(_OFFSET)
    t = np.where(flat, p[1], p[2]) + np.float32(_OFFSET)
    iu = (s * texels).astype(np.int32) & (_TILE - 1)
    iv = (t * texels).astype(np.int32) & (_TILE - 1)
    level = texture_tiles().take((materials["pattern"].take(m) * _TILE + iv) * _TILE + iu)
    return pal.take(m * LEVELS + level, axis=1)  # take: several times faster than [:, i]


# ----------------------------------------------------------------------------------------
# Mesh pieces: (verts (v, 3) float32, tris (f, 3) int64, tri_mat (f,) int64)
# ----------------------------------------------------------------------------------------


def _mesh(verts, tris, mat: int):
    verts, tris = np.asarray(verts, np.float32), np.asarray(tris, np.int64)
    return verts, tris, np.full(len(tris), mat, np.int64)


def merge(parts):
    """Concatenate mesh pieces into one (verts, tris, tri_mat)."""
    if not parts:
        return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int64), np.zeros(0, np.int64)
    offsets = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
    return (np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] + o for p, o in zip(parts, offsets)]),
            np.concatenate([p[2] for p in parts]))


def wall_quad(a, b, mat: int):
    """A vertical quad from floor to ceiling between floor points a and b."""
    (xa, ya), (xb, yb) = a, b
    v = [(xa, ya, 0), (xb, yb, 0), (xb, yb, WALL_H), (xa, ya, WALL_H)]
    return _mesh(v, [(0, 1, 2), (0, 2, 3)], mat)


def flat_quad(rect, z: float, mat: int):
    x0, y0, x1, y1 = rect
    return _mesh([(x0, y0, z), (x1, y0, z), (x1, y1, z), (x0, y1, z)],
                 [(0, 1, 2), (0, 2, 3)], mat)


def box(lo, hi, mat: int):
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    return _mesh(_unit("box") * (hi - lo) + lo, _unit_tris("box"), mat)


def sphere(centre, radius, mat: int, squash: float = 1.0):
    v = _unit("sphere") * radius * np.array([1.0, 1.0, squash]) + np.asarray(centre)
    return _mesh(v, _unit_tris("sphere"), mat)


def cone(base, radius, height, mat: int):
    v = _unit("cone") * np.array([radius, radius, height]) + np.asarray(base)
    return _mesh(v, _unit_tris("cone"), mat)


@lru_cache(maxsize=None)
def _unit_mesh(kind: str):
    """Unit box [0, 1]^3, unit sphere, unit cone (radius 1, height 1, base at z = 0)."""
    make = {"box": lambda: o3d.geometry.TriangleMesh.create_box(1, 1, 1),
            "sphere": lambda: o3d.geometry.TriangleMesh.create_sphere(1.0, resolution=6),
            "cone": lambda: o3d.geometry.TriangleMesh.create_cone(1.0, 1.0, resolution=10)}
    m = make[kind]()
    return np.asarray(m.vertices, np.float64), np.asarray(m.triangles, np.int64)


def _unit(kind):
    return _unit_mesh(kind)[0]


def _unit_tris(kind):
    return _unit_mesh(kind)[1]


# ----------------------------------------------------------------------------------------
# Characters: a fixed shape and colour per kind (their identity)
# ----------------------------------------------------------------------------------------

KINDS = ("imp", "robot", "slime")


def add_kind_materials(mats: Materials) -> dict[str, tuple[int, int]]:
    """(body, head) materials per kind; the same in every seed, so identity is stable."""
    return {"imp": (mats.add("stripes", (0.85, 0.25, 0.1), (0.6, 0.12, 0.05), scale=0.3),
                    mats.add("flat", (0.95, 0.6, 0.2))),
            "robot": (mats.add("checks", (0.55, 0.65, 0.8), (0.3, 0.35, 0.45), scale=0.3),
                      mats.add("flat", (0.2, 0.9, 1.0), emissive=True)),
            "slime": (mats.add("noise", (0.3, 0.85, 0.25), (0.1, 0.5, 0.1), scale=0.3),
                      mats.add("flat", (0.9, 1.0, 0.5)))}


def character_mesh(kind: str, kind_mats: dict, position, yaw_deg: float):
    """Mesh of a character standing at `position` (floor point), facing `yaw_deg`."""
    body, head = kind_mats[kind]
    if kind == "imp":
        parts = [cone((0, 0, 0), 0.35, 1.2, body), sphere((0, 0, 1.35), 0.25, head)]
    elif kind == "robot":
        parts = [box((-0.2, -0.3, 0.0), (0.2, 0.3, 1.1), body),
                 box((-0.15, -0.15, 1.15), (0.2, 0.15, 1.45), head)]
    else:
        parts = [sphere((0, 0, 0.3), 0.55, body, squash=0.6),
                 sphere((0.3, 0, 0.55), 0.12, head)]
    verts, tris, tri_mat = merge(parts)
    return verts @ yaw_rotation(yaw_deg).T + np.asarray(position, np.float32), tris, tri_mat


def yaw_rotation(yaw_deg: float) -> np.ndarray:
    """(3, 3) float32 rotation by `yaw_deg` degrees about +z (counter-clockwise from above)."""
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], np.float32)


# bounding sphere around a character's centre (z = 0.75): its meshes reach 0.85 (the imp's
# head), tests/test_engine_procedural.py checks that every vertex is inside
CHARACTER_RADIUS = 0.9


@dataclass(frozen=True)
class Character:
    """A character walking a circle: position and heading are functions of the step."""

    kind: str
    centre: tuple[float, float]
    radius: float  # of the circle (m)
    omega: float  # degrees per step (sign = direction)
    phase: float  # degrees at step 0

    def pose(self, step: int) -> tuple[np.ndarray, float]:
        """(floor position (3,), heading degrees) at `step`."""
        a = math.radians(self.phase + self.omega * step)
        pos = np.array([self.centre[0] + self.radius * math.cos(a),
                        self.centre[1] + self.radius * math.sin(a), 0.0])
        return pos, math.degrees(a) + math.copysign(90.0, self.omega)


# ----------------------------------------------------------------------------------------
# Layout
# ----------------------------------------------------------------------------------------


@dataclass
class Level:
    seed: int
    rooms: list[tuple]  # (x0, y0, x1, y1) metres
    corridors: list[tuple]
    doors: list[tuple]  # door slab footprints (x0, y0, x1, y1), closed at reset
    free: np.ndarray  # (NCELLS, NCELLS) bool, [iy, ix]: floor the player may stand on
    mesh: tuple  # static (verts, tris, tri_mat) without doors
    door_mat: int
    fire_mat: int  # emissive orange of fireballs
    lamps: np.ndarray  # (L, 3) light positions
    characters: list[Character]
    kind_mats: dict
    materials: dict  # Materials.arrays()
    spawn: tuple[float, float, float]  # x, y, yaw degrees
    # materials painted on rectangles of wall segments (`_poster_arrays`); none with "room"
    posters: dict


def cells(rect) -> tuple[slice, slice]:
    """Grid index slices (rows = y, cols = x) covered by a rect in metres."""
    x0, y0, x1, y1 = (int(round((v - X0) / CELL)) for v in rect)
    return slice(y0, y1), slice(x0, x1)


def _snap(v: float) -> float:
    return round(v / CELL) * CELL


def _rooms(rng) -> list[tuple]:
    rooms = []
    for j in range(GRID):
        for i in range(GRID):
            w, h = (_snap(rng.uniform(4.5, 6.5)) for _ in range(2))
            # room stays at least 0.75 m inside its 8 m cell, so corridors are >= 1.5 m long
            x0 = _snap(rng.uniform(i * PITCH + 0.75, (i + 1) * PITCH - 0.75 - w))
            y0 = _snap(rng.uniform(j * PITCH + 0.75, (j + 1) * PITCH - 0.75 - h))
            rooms.append((x0, y0, x0 + w, y0 + h))
    return rooms


def _edges(rng) -> tuple[list, list]:
    """Random spanning tree over the room grid (Kruskal) and the edges left over."""
    edges = [(j * GRID + i, j * GRID + i + 1) for j in range(GRID) for i in range(GRID - 1)]
    edges += [(j * GRID + i, (j + 1) * GRID + i) for j in range(GRID - 1) for i in range(GRID)]
    order = rng.permutation(len(edges))
    parent = list(range(GRID * GRID))

    def root(a):
        while parent[a] != a:
            a = parent[a]
        return a

    tree, rest = [], []
    for k in order:
        a, b = edges[k]
        ra, rb = root(a), root(b)
        (rest if ra == rb else tree).append(edges[k])
        parent[ra] = rb
    return tree, rest


def _corridor(rng, ra, rb, horizontal: bool) -> tuple:
    """Corridor rect joining room a to room b (b right of / above a)."""
    lo_ax, hi_ax = (1, 3) if horizontal else (0, 2)  # the axis across the corridor
    lo, hi = max(ra[lo_ax], rb[lo_ax]), min(ra[hi_ax], rb[hi_ax])
    c0 = _snap(rng.uniform(lo, hi - CORRIDOR_W))
    if horizontal:
        return (ra[2], c0, rb[0], c0 + CORRIDOR_W)
    return (c0, ra[3], c0 + CORRIDOR_W, rb[1])


def _door(corr: tuple, horizontal: bool) -> tuple:
    x0, y0, x1, y1 = corr
    if horizontal:
        m = _snap((x0 + x1) / 2)
        return (m - CELL, y0, m, y1)
    m = _snap((y0 + y1) / 2)
    return (x0, m - CELL, x1, m)


def _walls(free: np.ndarray, wallmat: np.ndarray) -> list:
    """Wall quads along every boundary between walkable and solid cells, merged in runs."""
    parts = []
    for axis in (0, 1):
        f, m = (free, wallmat) if axis == 0 else (free.T, wallmat.T)
        edge = f[1:] != f[:-1]  # (n - 1, n): boundary between row k and k + 1
        mat = np.where(edge, np.where(f[1:], m[1:], m[:-1]), -1)
        for k, row in enumerate(mat):
            change = np.flatnonzero(np.diff(row)) + 1
            starts, ends = np.r_[0, change], np.r_[change, len(row)]
            c = X0 + (k + 1) * CELL  # the boundary line's coordinate
            for s, e in zip(starts, ends):
                if row[s] >= 0:
                    a, b = X0 + s * CELL, X0 + e * CELL
                    ends_ab = ((a, c), (b, c)) if axis == 0 else ((c, a), (c, b))
                    parts.append(wall_quad(*ends_ab, int(row[s])))
    return parts


def _furnish(rng, mats: dict, room, corridors, free) -> tuple[list, list]:
    """A lamp and 1-3 props in the room's corners, away from corridor mouths.

    Marks the props' cells as not walkable in `free`; returns (mesh parts, lamp positions).
    """
    x0, y0, x1, y1 = room
    corners = [(x0 + 0.75, y0 + 0.75), (x1 - 0.75, y0 + 0.75),
               (x0 + 0.75, y1 - 0.75), (x1 - 0.75, y1 - 0.75)]
    corners = [c for c in corners if all(
        not (cx0 - 1.5 < c[0] < cx1 + 1.5 and cy0 - 1.5 < c[1] < cy1 + 1.5)
        for cx0, cy0, cx1, cy1 in corridors)]
    parts, lamps = [], []
    kinds = ["lamp"] + list(rng.choice(["pillar", "crate", "sphere"], size=3))
    for (cx, cy), kind in zip([corners[k] for k in rng.permutation(len(corners))], kinds):
        half = 0.25 if kind in ("pillar", "lamp") else 0.375
        foot = (cx - half, cy - half, cx + half, cy + half)
        free[cells(foot)] = False
        if kind == "lamp":
            parts += [box((cx - 0.05, cy - 0.05, 0), (cx + 0.05, cy + 0.05, 2.0), mats["post"]),
                      sphere((cx, cy, 2.15), 0.18, mats["bulb"])]
            lamps.append((cx, cy, 2.15))
        elif kind == "pillar":
            parts.append(box((foot[0], foot[1], 0), (foot[2], foot[3], WALL_H), mats["pillar"]))
        elif kind == "crate":
            parts.append(box((foot[0], foot[1], 0), (foot[2], foot[3], 0.75), mats["crate"]))
        else:
            parts += [box((cx - 0.15, cy - 0.15, 0), (cx + 0.15, cy + 0.15, 0.6), mats["post"]),
                      sphere((cx, cy, 0.95), 0.35, mats["ball"])]
    return parts, lamps


# ----------------------------------------------------------------------------------------
# Segment walls: a material per wall segment, posters per room
# ----------------------------------------------------------------------------------------


def check_walls(walls) -> str:
    """`walls` if it is one of WALLS, else a ValueError naming it."""
    if not (isinstance(walls, str) and walls in WALLS):
        raise ValueError(f"walls must be one of {WALLS}, got {walls!r}")
    return walls


def _segment_materials(wall_parts: list, mats: Materials, rng) -> list:
    """The quads of `_walls`, each with a material of its own instead of its room's: quads
    that shared one (a room's walls, the corridors') get hues GOLDEN apart and the patterns
    of a shuffled list in turn, so no two walls of a room look alike."""
    shared = [int(part[2][0]) for part in wall_parts]
    out = list(wall_parts)
    for group in dict.fromkeys(shared):  # first-seen order, fixed by the layout
        hue0, patterns = rng.uniform(), rng.permutation(PATTERNS[1:])
        for j, k in enumerate(k for k, m in enumerate(shared) if m == group):
            hue = hue0 + GOLDEN * j
            mat = mats.add(patterns[j % len(patterns)],
                           _hsv(hue, rng.uniform(0.35, 0.75), rng.uniform(0.65, 0.95)),
                           _hsv(hue + 0.06, rng.uniform(0.45, 0.7), rng.uniform(0.25, 0.5)),
                           scale=rng.uniform(0.5, 1.3))
            out[k] = _mesh(wall_parts[k][0], wall_parts[k][1], mat)
    return out


def _wall_span(quad) -> tuple[int, float, float]:
    """(axis the wall quad runs along: 0 = x, 1 = y; its lowest and highest coordinate)."""
    (xa, ya, _), (xb, yb, _) = quad[0][0], quad[0][1]  # its two floor corners
    axis = 0 if ya == yb else 1
    a, b = sorted((xa, xb) if axis == 0 else (ya, yb))
    return axis, float(a), float(b)


def _poster(quad, mats: Materials, rng, hue: float, pattern: str) -> tuple:
    """A poster on wall quad `quad`, 0.25 m or more from its ends, as a `_poster_arrays` row:
    0.6-1.4 m wide, 0.6-1.0 m tall, its bottom 0.9-1.3 m above the floor (eyes are at 1.5)."""
    axis, a, b = _wall_span(quad)
    width = rng.uniform(0.6, min(1.4, b - a - 0.5))
    centre = rng.uniform(a + 0.25 + width / 2, b - 0.25 - width / 2)
    z0, height = rng.uniform(0.9, 1.3), rng.uniform(0.6, 1.0)
    mat = mats.add(pattern, _hsv(hue, 0.85, 0.95), _hsv(hue + 0.5, 0.7, 0.3),
                   scale=rng.uniform(0.15, 0.35))
    return (int(quad[2][0]), axis, centre - width / 2, centre + width / 2, z0, z0 + height, mat)


def _posters(wall_parts: list, owners: list, n_rooms: int, mats: Materials, rng) -> dict:
    """Up to POSTERS posters per room, each on another of its wall segments at least
    POSTER_WALL long, with hues GOLDEN apart and patterns of their own. `wall_parts` are
    segment walls (a material each, which a poster names as the wall it hangs on);
    `owners[k]` is the room of quad k (None for a corridor's)."""
    rows, spans = [], [_wall_span(part) for part in wall_parts]
    for room in range(n_rooms):
        long = [k for k, (owner, (_, a, b)) in enumerate(zip(owners, spans))
                if owner == room and b - a >= POSTER_WALL]
        hue0, patterns = rng.uniform(), rng.permutation(PATTERNS)
        for j, k in enumerate(rng.permutation(long)[:POSTERS]):
            rows.append(_poster(wall_parts[k], mats, rng, hue0 + GOLDEN * j, patterns[j]))
    return _poster_arrays(rows)


def _poster_arrays(rows: list[tuple]) -> dict:
    """`Level.posters` from rows (wall material, axis, lo, hi, z0, z1, poster material): a
    point of a wall of material `on` whose coordinate along `axis` (0 = x, 1 = y) is in
    [lo, hi] and whose height is in [z0, z1] (`rect`, metres) shows material `mat`."""
    table = np.array(rows, np.float64).reshape(-1, 7)
    return {"on": table[:, 0].astype(np.int64), "axis": table[:, 1].astype(np.int64),
            "rect": table[:, 2:6].astype(np.float32), "mat": table[:, 6].astype(np.int64)}


def build_world(seed: int, n_characters: int = 4, walls: str = "room") -> Level:
    """The world of `seed` with walls as `walls` says (see the module docstring)."""
    check_walls(walls)
    rng = np.random.default_rng(seed)
    mats = Materials()
    rooms = _rooms(rng)
    tree, rest = _edges(rng)
    links = tree + [rest[k] for k in rng.choice(len(rest), size=2, replace=False)]
    corridors = [_corridor(rng, rooms[a], rooms[b], b == a + 1) for a, b in links]
    doors = [_door(c, b == a + 1) for c, (a, b) in zip(corridors[len(tree):], links[len(tree):])]
    free = np.zeros((NCELLS, NCELLS), bool)
    wallmat = np.full((NCELLS, NCELLS), -1, np.int64)
    parts = []  # floors and ceilings; then come the walls and the props
    corridor_mat = mats.add("bricks", (0.55, 0.5, 0.45), (0.25, 0.22, 0.2), scale=0.8)
    room_mats = [_room_materials(mats, rng) for _ in rooms]
    for rect, (wall, floor, ceil) in zip(rooms + corridors,
                                         room_mats + [(corridor_mat,) * 3] * len(corridors)):
        free[cells(rect)] = True
        wallmat[cells(rect)] = wall
        parts += [flat_quad(rect, 0.0, floor), flat_quad(rect, WALL_H, ceil)]
    wall_parts = _walls(free, wallmat)
    props = {"post": mats.add("flat", (0.3, 0.3, 0.32)),
             "bulb": mats.add("flat", (1.0, 0.9, 0.6), emissive=True),
             "pillar": mats.add("stripes", (0.85, 0.85, 0.8), (0.4, 0.4, 0.45), scale=0.5),
             "crate": mats.add("checks", (0.65, 0.45, 0.2), (0.45, 0.3, 0.12), scale=0.375),
             "ball": mats.add("noise", (0.9, 0.2, 0.5), (0.3, 0.1, 0.6), scale=0.4)}
    door_mat = mats.add("stripes", (0.5, 0.32, 0.15), (0.35, 0.2, 0.1), scale=0.25)
    fire_mat = mats.add("noise", (1.0, 0.75, 0.2), (1.0, 0.35, 0.05), scale=0.1, emissive=True)
    lamps, prop_parts = [], []
    for room in rooms:
        p, lmp = _furnish(rng, props, room, corridors, free)
        prop_parts += p
        lamps += lmp
    kind_mats = add_kind_materials(mats)
    characters = []
    for k, r in enumerate(rng.choice(len(rooms), size=n_characters, replace=False)):
        x0, y0, x1, y1 = rooms[r]
        characters.append(Character(
            KINDS[k % len(KINDS)], ((x0 + x1) / 2, (y0 + y1) / 2),
            min(x1 - x0, y1 - y0) / 2 - 1.3, float(rng.choice([-1, 1]) * rng.uniform(6, 12)),
            float(rng.uniform(0, 360))))
    s = rooms[rng.integers(len(rooms))]
    spawn = ((s[0] + s[2]) / 2, (s[1] + s[3]) / 2, float(rng.uniform(-180, 180)))
    posters = _poster_arrays([])
    if walls == "segment":  # last, from a stream of its own: all else is as with "room"
        wall_rng = np.random.default_rng([WALLS_STREAM, seed])
        owner = {wall: k for k, (wall, _, _) in enumerate(room_mats)}
        owners = [owner.get(int(part[2][0])) for part in wall_parts]
        wall_parts = _segment_materials(wall_parts, mats, wall_rng)
        posters = _posters(wall_parts, owners, len(rooms), mats, wall_rng)
    return Level(seed, rooms, corridors, doors, free, merge(parts + wall_parts + prop_parts),
                 door_mat, fire_mat, np.array(lamps, np.float64), characters, kind_mats,
                 mats.arrays(), spawn, posters)
