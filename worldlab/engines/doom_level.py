"""A DOOM level from its WAD: a triangle mesh in metres, ray-cast with open3d for exact
metric depth, and the floor a player can reach (`reachable_area`).

ViZDoom's own depth buffer is uint8 (steps of ~0.22 m, saturating after a few metres at low
resolution), so the DOOM engine computes depth by ray casting this mesh with the very camera
(K, c2w) of the frame instead, and uses the buffer only for sprites (monsters, items).

The level comes from ViZDoom's `sectors_info` (every sector's floor/ceiling height and its
lines) plus one fact ViZDoom does not report: which ceilings are sky. That is read from the
WAD's `SECTORS` lump (ceiling flat `F_SKY*`); the lump lists sectors in the same order as
`Sector.id`.

- Walls: a line bordering one sector is a solid wall from its floor to its ceiling; a line
  between two sectors gets a lower wall between the two floors and an upper wall between the
  two ceilings (none between two sky ceilings: DOOM draws sky there).
- Floors and ceilings: each sector is cut into vertical slabs at its vertices' x values;
  inside a slab its lines do not cross, so sorting them by height and pairing them (even-odd
  rule) gives trapezoids. Exact for non-convex sectors and sectors with holes. Sky ceilings
  are left open, so rays through them miss and get depth `inf`.

Doors and lifts move: `LevelMesh.update(floor, ceiling)` takes the current heights and
rebuilds the open3d scene only when one changed.

Where a player can go (`reachable_area`, no game and no open3d needed): the map's lumps
(`read_map`) give every sector's heights at level start and the sectors on each line. A
flood fill from the player start's sector crosses a two-sided line that is not flagged
impassable when DOOM lets a player walk over it: a step up of at most 24 units, any drop,
an opening (lower ceiling - higher floor) of at least 56 units. Doors, lifts and lowering
floors are taken as triggered (a door's ceiling at the lowest neighbouring ceiling - 4, a
lift's floor at the lowest neighbouring floor too; keys assumed found), and teleport lines
lead to their tagged sectors: heights at level start alone reach only 300 of MAP01's 2810
m^2, the rooms before the first door. The area is the floor of the reachable sectors a
player fits in at level start (closed doors excluded); stairs raised by switches and the
like stay out.

Units (measured, see the camera notes of `engines/doom.py`): 32 map units per metre horizontally;
DOOM draws with pixels 1.2 times taller than wide, so a metric world with square pixels has
32 / 1.2 = 26.67 map units per metre vertically (the eye, 41 units above the floor, is then
at 1.54 m).

Shape names: n vertices, m triangles, k lines, s sectors, t things, h w height width.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..camera import check_c2w, ray_directions
from .coverage import ReachableArea, in_triangles

UNITS_PER_M_XY = 32.0  # map units per metre, horizontal
PIXEL_ASPECT = 1.2  # DOOM pixels are 1.2 times taller than wide (320x200 on a 4:3 screen)
UNITS_PER_M_Z = UNITS_PER_M_XY / PIXEL_ASPECT  # 26.67 map units per metre, vertical

_MAP_LUMPS = ("THINGS", "LINEDEFS", "SIDEDEFS", "VERTEXES", "SEGS", "SSECTORS", "NODES",
              "SECTORS", "REJECT", "BLOCKMAP", "BEHAVIOR", "SCRIPTS")  # after a map's marker


# ----------------------------------------------------------------------------------------
# The WAD: map names and sky ceilings
# ----------------------------------------------------------------------------------------


def _wad_directory(wad_path) -> tuple[bytes, list[tuple[int, int, str]]]:
    data = Path(wad_path).read_bytes()
    if len(data) < 12 or data[:4] not in (b"IWAD", b"PWAD"):
        raise ValueError(f"{wad_path} is not a WAD file (expected an IWAD/PWAD header)")
    n, offset = struct.unpack_from("<ii", data, 4)
    entries = []
    for i in range(n):
        pos, size, name = struct.unpack_from("<ii8s", data, offset + 16 * i)
        entries.append((pos, size, name.rstrip(b"\0").decode("ascii", "replace")))
    return data, entries


def map_names(wad_path) -> list[str]:
    """Names of the maps in a WAD (a marker lump followed by THINGS, LINEDEFS, ...)."""
    _, entries = _wad_directory(wad_path)
    names = [e[2] for e in entries]
    return [names[i] for i in range(len(names) - 1) if names[i + 1] == "THINGS"]


@dataclass(frozen=True)
class MapData:
    """One map of a WAD as read from its lumps, in map units (DOOM's own, not metres).

    Sector `i` is ViZDoom's `Sector.id == i` (both follow the SECTORS lump); heights are the
    ones at level start, before any door or lift moves.
    """

    lines: np.ndarray  # (k, 4) x1 y1 x2 y2 of each linedef
    flags: np.ndarray  # (k,) linedef flags; bit 0 = impassable for players and monsters
    special: np.ndarray  # (k,) linedef action (1 = manual door, 97 = teleport, ...)
    tag: np.ndarray  # (k,) sector tag the action moves
    sides: np.ndarray  # (k, 2) front and back sector; back -1 on a one-sided line
    floor: np.ndarray  # (s,) floor height
    ceiling: np.ndarray  # (s,) ceiling height
    sector_tag: np.ndarray  # (s,)
    sky: np.ndarray  # (s,) bool: ceiling flat F_SKY*
    things: np.ndarray  # (t, 5) x, y, angle, type, flags (bits 0-2 skills, 4 multiplayer)


def _map_lumps(wad_path, map_name: str) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """The WAD's bytes and the (offset, size) of each lump of `map_name`."""
    data, entries = _wad_directory(wad_path)
    names = [e[2] for e in entries]
    if map_name not in map_names(wad_path):
        raise ValueError(f"unknown map {map_name!r} in {Path(wad_path).name}; expected one "
                         f"of {map_names(wad_path)}")
    lumps = {}
    for pos, size, name in entries[names.index(map_name) + 1:]:
        if name not in _MAP_LUMPS or name in lumps:  # the next map or other data begins
            break
        lumps[name] = (pos, size)
    return data, lumps


def _table(data: bytes, lump: tuple[int, int], fmt: str) -> list[tuple]:
    pos, size = lump
    return list(struct.iter_unpack(fmt, data[pos:pos + size]))


def _sector_table(data: bytes, lumps: dict) -> list[tuple]:
    # one sector = floor h, ceiling h (int16), floor flat, ceiling flat (8 chars), light,
    # special, tag (int16): 26 bytes
    return _table(data, lumps["SECTORS"], "<hh8s8shhh")


def read_map(wad_path, map_name: str) -> MapData:
    """The lumps of `map_name` (a Doom-format map of the WAD at `wad_path`) as arrays."""
    data, lumps = _map_lumps(wad_path, map_name)
    if "BEHAVIOR" in lumps:  # Hexen format: other line and thing records, other actions
        raise ValueError(f"map {map_name!r} of {Path(wad_path).name} is in Hexen format; "
                         f"expected a Doom-format map (THINGS, LINEDEFS, ... without BEHAVIOR)")
    vertex = np.array(_table(data, lumps["VERTEXES"], "<hh"), np.float64).reshape(-1, 2)
    # linedef: v1, v2, flags, special, tag, front side, back side (0xFFFF = none)
    line = np.array(_table(data, lumps["LINEDEFS"], "<7H"), np.int64).reshape(-1, 7)
    # sidedef: x/y offset, upper/lower/middle texture, sector
    side_sector = np.array([s[-1] for s in _table(data, lumps["SIDEDEFS"], "<hh8s8s8sH")],
                           np.int64)
    sector = _sector_table(data, lumps)
    sides = np.where(line[:, 5:7] == 0xFFFF, -1,
                     side_sector[np.minimum(line[:, 5:7], len(side_sector) - 1)])
    return MapData(
        lines=vertex[line[:, :2]].reshape(-1, 4), flags=line[:, 2], special=line[:, 3],
        tag=line[:, 4], sides=sides,
        floor=np.array([s[0] for s in sector], np.float64),
        ceiling=np.array([s[1] for s in sector], np.float64),
        sector_tag=np.array([s[6] for s in sector], np.int64),
        sky=np.array([s[3].startswith(b"F_SKY") for s in sector], bool),
        things=np.array(_table(data, lumps["THINGS"], "<hhHHH"), np.float64).reshape(-1, 5))


# ----------------------------------------------------------------------------------------
# Topology: what does not move (lines, floor polygons), built once per level
# ----------------------------------------------------------------------------------------


def _sector_lines(m: MapData) -> tuple[list[np.ndarray], dict]:
    """Lines (k, 4) of each sector, in sector order (parity-cancelled), and the sectors on
    each undirected line, from the WAD's linedefs. A line with one sector on both sides (a
    walk-over trigger, a grate) is listed twice in it, so it encloses nothing and raises no
    wall: ViZDoom's `Sector.lines` lists it once, which made it a wall from floor to ceiling
    that the game does not draw. A middle texture on such a line (MAP01's three grates) is
    not in the mesh either."""
    per_sector = [set() for _ in m.floor]
    sides = {}
    for (x1, y1, x2, y2), (front, back) in zip(m.lines.tolist(), m.sides.tolist()):
        a, b = (x1, y1), (x2, y2)
        key = (a, b) if a <= b else (b, a)
        for sector in (front,) if back < 0 else (front, back):
            per_sector[sector] ^= {key}  # a line listed twice inside one sector: nothing
        sides[key] = [front] if back < 0 else [front, back]
    return ([np.array(sorted(lines), dtype=np.float64).reshape(-1, 4) for lines in per_sector],
            sides)


def _slab_triangles(lines: np.ndarray) -> np.ndarray:
    """Triangulate the region enclosed by non-crossing lines (k, 4) -> (m, 3, 2) xy."""
    x1, y1, x2, y2 = lines.T
    lo, hi = np.minimum(x1, x2), np.maximum(x1, x2)
    xs = np.unique(np.concatenate([x1, x2]))
    tris = []
    for xa, xb in zip(xs[:-1], xs[1:]):
        span = (lo <= xa) & (hi >= xb)
        if span.sum() < 2:
            continue
        t = (np.array([xa, xb])[None] - x1[span, None]) / (x2 - x1)[span, None]  # (k, 2)
        ys = y1[span, None] + t * (y2 - y1)[span, None]  # (k, 2): y at xa and xb
        ys = ys[np.argsort(ys.sum(1))]
        for (ya0, yb0), (ya1, yb1) in zip(ys[0::2], ys[1::2]):  # even-odd: inside pairs
            tris.append([[xa, ya0], [xb, yb0], [xb, yb1]])
            tris.append([[xa, ya0], [xb, yb1], [xa, ya1]])
    tris = np.array(tris, dtype=np.float64).reshape(-1, 3, 2)
    area = np.abs(np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]))
    return tris[area > 1e-9]


# ----------------------------------------------------------------------------------------
# Where a player can go: DOOM's movement rules over the map at level start
# ----------------------------------------------------------------------------------------

STEP_UP = 24.0  # the highest floor step a player climbs (map units)
PLAYER_HEIGHT = 56.0  # a player passes an opening (lower ceiling - higher floor) this tall
PLAYER_RADIUS = 16.0  # half the side of the player's square bounding box (map units)
PLAYER_STARTS = (1, 2, 3, 4, 11)  # thing types: player 1-4 and deathmatch starts
# a random start keeps the player's square box (half side 16 units) off every wall at any
# angle: 16 sqrt(2) units = 0.71 m
START_CLEARANCE_M = 0.75

# Linedef actions (vanilla DOOM numbers) that open a way: a door's ceiling rises to the
# lowest neighbouring ceiling - 4; a lift or a lowering floor goes down to the lowest
# (highest) neighbouring floor; a teleport moves the player into the tagged sector.
MANUAL_DOORS = frozenset({1, 26, 27, 28, 31, 32, 33, 34, 117, 118})  # opens its back sector
TAGGED_DOORS = frozenset({2, 4, 29, 46, 61, 63, 86, 90, 99, 103, 105, 106, 108, 109, 111,
                          112, 114, 115, 133, 134, 135, 136, 137})
TO_LOWEST_FLOOR = frozenset({10, 21, 62, 88, 120, 121, 122, 123,  # lifts (and back up)
                             23, 37, 38, 60, 82, 84})  # floors that lower for good
TO_HIGHEST_FLOOR = frozenset({19, 45, 83, 102})
TO_HIGHEST_FLOOR_8 = frozenset({36, 70, 71, 98})  # 8 units above the highest neighbour
TELEPORTS = frozenset({39, 97})


def _neighbour_extremes(m: MapData) -> tuple[np.ndarray, ...]:
    """(s,) lowest ceiling, lowest floor and highest floor among each sector's neighbours
    (inf / -inf without neighbours), as DOOM's P_FindLowest/HighestSurrounding compute."""
    a, b = m.sides[:, 0], m.sides[:, 1]
    pair = (b >= 0) & (a != b)
    src = np.concatenate([a[pair], b[pair]])
    dst = np.concatenate([b[pair], a[pair]])
    n = len(m.floor)
    low_ceil, low_floor, high_floor = np.full(n, np.inf), np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(low_ceil, src, m.ceiling[dst])
    np.minimum.at(low_floor, src, m.floor[dst])
    np.maximum.at(high_floor, src, m.floor[dst])
    return low_ceil, low_floor, high_floor


def _moved_heights(m: MapData) -> tuple[np.ndarray, np.ndarray]:
    """(s, 2) floor heights a sector takes (at start, after its mover) and (s,) its highest
    ceiling, once every door, lift and lowering floor of the map has been triggered."""
    low_ceil, low_floor, high_floor = _neighbour_extremes(m)
    floor = np.stack([m.floor, m.floor], 1)
    ceiling = m.ceiling.copy()
    door = np.zeros(len(m.floor), bool)
    manual = np.isin(m.special, list(MANUAL_DOORS)) & (m.sides[:, 1] >= 0)
    door[m.sides[manual, 1]] = True
    for specials, kind in ((TAGGED_DOORS, "door"), (TO_LOWEST_FLOOR, "lowest"),
                           (TO_HIGHEST_FLOOR, "highest"), (TO_HIGHEST_FLOOR_8, "highest8")):
        tags = np.unique(m.tag[np.isin(m.special, list(specials)) & (m.tag > 0)])
        moved = np.isin(m.sector_tag, tags)
        if kind == "door":
            door |= moved
        else:
            target = {"lowest": np.minimum(low_floor, m.floor), "highest": high_floor,
                      "highest8": high_floor + 8}[kind]
            floor[moved, 1] = np.minimum(floor[moved, 1], target[moved])  # they go down
    ceiling[door] = np.maximum(ceiling[door], low_ceil[door] - 4)
    return floor, ceiling


def _passable(floor_a, floor_b, ceil_a, ceil_b) -> np.ndarray:
    """Whether a player steps from floor a to floor b (DOOM's P_TryMove: a step up of at
    most STEP_UP, any drop, an opening of at least PLAYER_HEIGHT)."""
    opening = np.minimum(ceil_a, ceil_b) - np.maximum(floor_a, floor_b)
    return (floor_b - floor_a <= STEP_UP) & (opening >= PLAYER_HEIGHT)


def _reachable_sectors(m: MapData, start: int) -> np.ndarray:
    """(s,) bool: sectors a player walks to from sector `start`, opening doors, riding
    lifts and teleporting (every mover of the map triggered: `_moved_heights`)."""
    floor, ceiling = _moved_heights(m)
    a, b = m.sides[:, 0], m.sides[:, 1]
    open_line = (b >= 0) & (m.flags & 1 == 0)
    edges = []
    for x, y in ((a, b), (b, a)):
        x, y = x[open_line], y[open_line]
        ok = np.zeros(len(x), bool)
        for i in range(2):  # any combination of the two floor heights of each sector
            for j in range(2):
                ok |= _passable(floor[x, i], floor[y, j], ceiling[x], ceiling[y])
        edges += list(zip(x[ok], y[ok]))
    for line in np.nonzero(np.isin(m.special, list(TELEPORTS)) & (m.tag > 0))[0]:
        edges += [(m.sides[line, 0], t) for t in np.nonzero(m.sector_tag == m.tag[line])[0]]
    out = [[] for _ in m.floor]
    for x, y in edges:
        out[x].append(y)
    seen, todo = np.zeros(len(m.floor), bool), [start]
    seen[start] = True
    while todo:
        for y in out[todo.pop()]:
            if not seen[y]:
                seen[y] = True
                todo.append(y)
    return seen


def _sector_triangles(per_sector: list[np.ndarray]) -> list[np.ndarray]:
    """Floor triangles (m_i, 3, 2) of each sector in map units (`_slab_triangles`) from its
    lines (`_sector_lines`), in sector order."""
    return [_slab_triangles(lines) if len(lines) else np.zeros((0, 3, 2))
            for lines in per_sector]


def reachable_area(m: MapData) -> ReachableArea:
    """The floor a player can stand on at level start among the sectors reachable from the
    player start, in metres. Its walls are the lines a player cannot pass at level start:
    one-sided or impassable lines, openings lower than PLAYER_HEIGHT (closed doors) and
    every edge of the area; a step between two of its sectors is no wall (a player
    overlapping it stands on the higher floor)."""
    starts = m.things[m.things[:, 3] == 1]
    if not len(starts):
        raise ValueError("the map has no player 1 start (thing type 1)")
    start_xy = starts[0, :2]
    tris = _sector_triangles(_sector_lines(m)[0])
    start = next((s for s, t in enumerate(tris)
                  if len(t) and in_triangles(start_xy[None], t)[0]), None)
    if start is None:
        raise ValueError(f"the player start {tuple(start_xy)} lies in no sector")
    stand = _reachable_sectors(m, start) & (m.ceiling - m.floor >= PLAYER_HEIGHT)
    a, b = m.sides[:, 0], np.maximum(m.sides[:, 1], 0)
    opening = np.minimum(m.ceiling[a], m.ceiling[b]) - np.maximum(m.floor[a], m.floor[b])
    inner = ((m.sides[:, 1] >= 0) & (m.flags & 1 == 0) & stand[a] & stand[b]
             & (opening >= PLAYER_HEIGHT))
    wall = (stand[a] | (stand[b] & (m.sides[:, 1] >= 0))) & ~inner
    floor = np.concatenate([tris[s] for s in np.nonzero(stand)[0]])
    return ReachableArea(floor / UNITS_PER_M_XY,
                         m.lines[wall].reshape(-1, 2, 2) / UNITS_PER_M_XY,
                         tuple(float(v) for v in start_xy / UNITS_PER_M_XY))


def _placed_things(m: MapData, skill: int) -> np.ndarray:
    """(t, 2) map units: things present in a single-player game at `skill` (1-5), player
    starts excluded (monsters, decorations, items)."""
    bit = {1: 1, 2: 1, 3: 2, 4: 4, 5: 4}[skill]  # THINGS flags: skills 1-2, 3, 4-5
    flags = m.things[:, 4].astype(np.int64)
    keep = (flags & bit > 0) & (flags & 16 == 0) & ~np.isin(m.things[:, 3], PLAYER_STARTS)
    return m.things[keep, :2]


def random_start(m: MapData, area: ReachableArea, skill: int,
                 rng: np.random.Generator) -> tuple[float, float]:
    """(x, y) metres at whole map units (what `warp` takes): uniform over `area`, far enough
    from its walls that the player's square box misses them at any angle, and from every
    thing placed at `skill` that a box of half side 16 units misses it too (DOOM's overlap
    test is per axis: |dx|, |dy| < 16 + the thing's radius; lamps, pillars and barrels have
    at most 16; larger monsters would be telefragged)."""
    things = _placed_things(m, skill)  # (t, 2)
    for _ in range(100):
        xy = np.round(area.sample(rng, 16, START_CLEARANCE_M) * UNITS_PER_M_XY)  # (16, 2)
        gap = np.abs(xy[:, None] - things[None]).max(-1)  # (16, t) per-axis distance
        clear = (gap >= 2 * PLAYER_RADIUS).all(1)
        if clear.any():
            x, y = xy[np.argmax(clear)] / UNITS_PER_M_XY
            return float(x), float(y)
    raise ValueError(f"no point of the area lies clear of its walls and {len(things)} things "
                     f"after 1600 tries")


# ----------------------------------------------------------------------------------------
# The mesh and its ray casting
# ----------------------------------------------------------------------------------------


class LevelMesh:
    """The level's walls, floors and ceilings in metres, ray-cast with open3d.

    Built from the WAD's map (`read_map`: its lines, the sectors on each side, the sky
    ceilings); call `update` with the sector heights of each new state (doors and lifts
    move them), then `depth`.
    """

    def __init__(self, m: MapData):
        self.sky = np.asarray(m.sky, dtype=bool)
        per_sector, sides = _sector_lines(m)
        tris = _sector_triangles(per_sector)
        self._flat_xy = np.concatenate(tris) / UNITS_PER_M_XY  # (m, 3, 2) metres
        self._flat_sector = np.concatenate([np.full(len(t), sid)
                                            for sid, t in enumerate(tris)])  # (m,)
        keys = list(sides)
        self._wall_xy = np.array(keys, dtype=np.float64).reshape(-1, 2, 2) / UNITS_PER_M_XY
        self._front = np.array([sides[k][0] for k in keys])  # (k,)
        self._back = np.array([sides[k][1] if len(sides[k]) > 1 else -1 for k in keys])
        self._heights = None
        self.scene = None

    def update(self, floor: np.ndarray, ceiling: np.ndarray) -> bool:
        """Set sector heights (map units, indexed by sector id); True if the scene changed."""
        heights = np.stack([np.asarray(floor, np.float64), np.asarray(ceiling, np.float64)])
        if self._heights is not None and np.array_equal(heights, self._heights):
            return False
        self._heights = heights
        vertices, triangles = self._triangles(heights / UNITS_PER_M_Z)
        from ._open3d import open3d as o3d  # here: recording without depth needs none

        self.scene = o3d.t.geometry.RaycastingScene()
        self.scene.add_triangles(o3d.core.Tensor(vertices.astype(np.float32)),
                                 o3d.core.Tensor(triangles.astype(np.uint32)))
        return True

    def _triangles(self, heights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vertices (n, 3) and triangles (m, 3) for heights (2, sectors) in metres."""
        floor, ceil = heights
        a, b, one = self._front, np.maximum(self._back, 0), self._back < 0
        lower = np.stack([np.minimum(floor[a], floor[b]), np.maximum(floor[a], floor[b])], 1)
        upper = np.stack([np.minimum(ceil[a], ceil[b]), np.maximum(ceil[a], ceil[b])], 1)
        solid = np.stack([floor[a], ceil[a]], 1)
        both_sky = ~one & self.sky[a] & self.sky[b]
        spans = np.concatenate([np.where(one[:, None], solid, lower), upper[~one & ~both_sky]])
        xy = np.concatenate([self._wall_xy, self._wall_xy[~one & ~both_sky]])  # (k', 2, 2)
        keep = spans[:, 1] > spans[:, 0]
        xy, spans = xy[keep], spans[keep]
        # a wall quad: (p1, lo), (p2, lo), (p2, hi), (p1, hi)
        quads = np.concatenate([xy[:, [0, 1, 1, 0]], spans[:, [0, 0, 1, 1], None]], -1)
        walls = np.concatenate([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]])  # (2k', 3, 3)
        s = self._flat_sector
        open_ceiling = ~self.sky[s]
        flats = np.concatenate([
            np.concatenate([self._flat_xy, np.broadcast_to(floor[s, None, None], (len(s), 3, 1))],
                           -1),
            np.concatenate([self._flat_xy[open_ceiling],
                            np.broadcast_to(ceil[s][open_ceiling, None, None],
                                            (int(open_ceiling.sum()), 3, 1))], -1)])
        tris = np.concatenate([walls, flats])  # (m, 3, 3)
        return tris.reshape(-1, 3), np.arange(3 * len(tris)).reshape(-1, 3)

    def depth(self, K: np.ndarray, c2w: np.ndarray, height: int, width: int) -> np.ndarray:
        """Metric z-depth (h, w) float32 of the level seen by camera (K, c2w); inf = miss."""
        if self.scene is None:
            raise ValueError("LevelMesh.depth called before update(floor, ceiling)")
        origins, dirs = ray_directions(K, check_c2w(c2w), height, width, normalize=False)
        rays = np.concatenate([origins, dirs], -1).astype(np.float32)  # (h, w, 6)
        # directions have unit z-depth, so the hit distance t is the z-depth itself
        from ._open3d import open3d as o3d

        t = self.scene.cast_rays(o3d.core.Tensor(rays))["t_hit"].numpy()
        return t.astype(np.float32)
