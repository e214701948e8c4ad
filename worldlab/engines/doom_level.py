"""A DOOM level as a triangle mesh in metres, ray-cast with open3d for exact metric depth.

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

Units (measured, see the camera notes of `engines/doom.py`): 32 map units per metre horizontally;
DOOM draws with pixels 1.2 times taller than wide, so a metric world with square pixels has
32 / 1.2 = 26.67 map units per metre vertically (the eye, 41 units above the floor, is then
at 1.54 m).

Shape names: n vertices, m triangles, k lines, h w height width.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..camera import check_c2w, ray_directions

UNITS_PER_M_XY = 32.0  # map units per metre, horizontal
PIXEL_ASPECT = 1.2  # DOOM pixels are 1.2 times taller than wide (320x200 on a 4:3 screen)
UNITS_PER_M_Z = UNITS_PER_M_XY / PIXEL_ASPECT  # 26.67 map units per metre, vertical

_MAP_LUMPS = ("THINGS", "LINEDEFS", "SIDEDEFS", "VERTEXES", "SEGS", "SSECTORS", "NODES",
              "SECTORS")


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


def sky_sectors(wad_path, map_name: str) -> np.ndarray:
    """(sectors,) bool: True where a sector's ceiling is sky (flat named F_SKY*)."""
    data, entries = _wad_directory(wad_path)
    names = [e[2] for e in entries]
    if map_name not in map_names(wad_path):
        raise ValueError(f"unknown map {map_name!r} in {Path(wad_path).name}; expected one "
                         f"of {map_names(wad_path)}")
    start = names.index(map_name)
    lumps = {e[2]: e for e in entries[start + 1:start + 1 + len(_MAP_LUMPS) + 3]}
    pos, size, _ = lumps["SECTORS"]
    # one sector = floor h, ceiling h (int16), floor flat, ceiling flat (8 chars), light,
    # special, tag (int16): 26 bytes
    ceilings = [data[pos + 26 * i + 12:pos + 26 * i + 20] for i in range(size // 26)]
    return np.array([c.startswith(b"F_SKY") for c in ceilings])


# ----------------------------------------------------------------------------------------
# Topology: what does not move (lines, floor polygons), built once per level
# ----------------------------------------------------------------------------------------


def _sector_lines(sectors) -> tuple[dict, dict]:
    """Lines per sector (parity-cancelled) and the sectors on each undirected line."""
    per_sector, sides = {}, {}
    for s in sectors:
        lines = set()
        for ln in s.lines:
            a, b = (ln.x1, ln.y1), (ln.x2, ln.y2)
            key = (a, b) if a <= b else (b, a)
            lines ^= {key}  # a line listed twice inside one sector encloses nothing
            sides.setdefault(key, []).append(s.id)
        per_sector[s.id] = np.array(sorted(lines), dtype=np.float64).reshape(-1, 4)
    return per_sector, sides


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
# The mesh and its ray casting
# ----------------------------------------------------------------------------------------


class LevelMesh:
    """The level's walls, floors and ceilings in metres, ray-cast with open3d.

    `sectors` are ViZDoom `Sector`s (from `state.sectors`), `sky` the (sectors,) mask of sky
    ceilings (`sky_sectors`). Call `update` with the heights of each new state, then `depth`.
    """

    def __init__(self, sectors, sky: np.ndarray):
        ids = [s.id for s in sectors]
        if sorted(ids) != list(range(len(sky))):
            raise ValueError(f"sectors_info lists {len(ids)} sectors but the WAD has "
                             f"{len(sky)}; is the map the one loaded by the game?")
        self.sky = np.asarray(sky, dtype=bool)
        per_sector, sides = _sector_lines(sectors)
        self._flat_xy, self._flat_sector = [], []
        for sid, lines in per_sector.items():
            tris = _slab_triangles(lines) if len(lines) else np.zeros((0, 3, 2))
            self._flat_xy.append(tris)
            self._flat_sector.append(np.full(len(tris), sid))
        self._flat_xy = np.concatenate(self._flat_xy) / UNITS_PER_M_XY  # (m, 3, 2) metres
        self._flat_sector = np.concatenate(self._flat_sector)  # (m,)
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
        import open3d as o3d  # here, not at import: recording without depth needs none

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
        import open3d as o3d

        t = self.scene.cast_rays(o3d.core.Tensor(rays))["t_hit"].numpy()
        return t.astype(np.float32)
