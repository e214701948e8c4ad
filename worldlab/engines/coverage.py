"""Where a player can stand, top-down, and how much of it a set of positions covers.

A `ReachableArea` is floor seen from above, in metres in the world's x, y: the triangles of
the floor the player can stand on and the wall segments that bound it. Engines build one
from their geometry (DOOM: `DoomEngine.reachable_area`, from the WAD by DOOM's movement
rules, see `doom_level.reachable_area`; the procedural world: its occupancy grid,
`area_from_grid`); recording draws random starts from it (`sample`) and
measures how much of a level its episodes visited (`coverage`, drawn by `coverage_figure`).

Coverage is counted on a square grid: a cell is reachable when its centre lies in the area,
visited when its centre is within `radius_m` of a visited position; the share is
visited / reachable cells, so it does not depend on how densely a walk was sampled.

Shape names: n points, m triangles, k walls, c grid cells.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

_CHUNK = 1 << 18  # point-triangle (or point-wall) pairs per vectorised block: ~13 MB


def _check_points(points_xy, what: str = "points_xy") -> np.ndarray:
    p = np.asarray(points_xy, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 2 or not np.isfinite(p).all():
        raise ValueError(f"{what} must be finite (n, 2) x, y in metres, got shape "
                         f"{p.shape} {p if p.size <= 4 else ''}")
    return p


def _positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
            or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number of metres > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True, eq=False)
class ReachableArea:
    """Floor a player can stand on, top-down, in metres (x, y of the world frame)."""

    triangles: np.ndarray  # (m, 3, 2) the floor
    walls: np.ndarray  # (k, 2, 2) segments the player cannot cross
    start_xy: tuple[float, float] | None = None  # the level's own start, if it has one

    def __post_init__(self):
        tris = np.asarray(self.triangles, np.float64)
        walls = np.asarray(self.walls, np.float64).reshape(-1, 2, 2)
        if tris.ndim != 3 or tris.shape[1:] != (3, 2) or not len(tris) \
                or not np.isfinite(tris).all():
            raise ValueError(f"triangles must be finite (m, 3, 2) with m > 0, got shape "
                             f"{tris.shape}")
        if not np.isfinite(walls).all():
            raise ValueError("walls must be finite (k, 2, 2) segments")
        object.__setattr__(self, "triangles", tris)
        object.__setattr__(self, "walls", walls)
        e1, e2 = tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]
        object.__setattr__(self, "_areas", np.abs(e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]) / 2)
        object.__setattr__(self, "_grids", {})  # cell_m -> grid: coverage asks again and again

    @property
    def area_m2(self) -> float:
        return float(self._areas.sum())

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) corners (2,) of the floor's bounding box."""
        flat = self.triangles.reshape(-1, 2)
        return flat.min(0), flat.max(0)

    def contains(self, points_xy) -> np.ndarray:
        """(n,) bool: whether each point lies on the floor (edges included)."""
        return in_triangles(_check_points(points_xy), self.triangles)

    def wall_distance(self, points_xy) -> np.ndarray:
        """(n,) metres from each point to the nearest wall segment (inf without walls)."""
        p = _check_points(points_xy)
        if not len(self.walls):
            return np.full(len(p), np.inf)
        a, d = self.walls[:, 0], self.walls[:, 1] - self.walls[:, 0]  # (k, 2)
        dd = np.maximum((d * d).sum(-1), 1e-18)
        out = np.empty(len(p))
        step = max(1, _CHUNK // len(a))
        for i in range(0, len(p), step):
            v = p[i:i + step, None] - a[None]  # (n, k, 2)
            t = np.clip((v * d).sum(-1) / dd, 0.0, 1.0)
            out[i:i + step] = np.sqrt((((v - t[..., None] * d) ** 2).sum(-1)).min(-1))
        return out

    def check_position(self, position_xy, clearance_m: float,
                       where: str = "the area") -> None:
        """Raise ValueError unless (x, y) lies on the floor `clearance_m` from its walls."""
        x, y = (float(v) for v in _check_points([position_xy], "position")[0])
        if not self.contains([(x, y)])[0]:
            lo, hi = self.bounds
            raise ValueError(f"position {(x, y)!r} is not on {where} (x {lo[0]:.1f}.."
                             f"{hi[0]:.1f}, y {lo[1]:.1f}..{hi[1]:.1f} m, with holes); "
                             f"expected a point of it, e.g. from start_options(seed)")
        gap = float(self.wall_distance([(x, y)])[0])
        if gap < clearance_m:
            raise ValueError(f"position {(x, y)!r} is {gap:.2f} m from a wall of {where}; "
                             f"expected at least {clearance_m} m")

    def sample(self, rng: np.random.Generator, n: int, clearance_m: float = 0.5) -> np.ndarray:
        """(n, 2) points uniform over the floor's area, each at least `clearance_m` from
        every wall (rejection sampling: deterministic for the state of `rng`)."""
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng must be a numpy.random.Generator, got {rng!r}")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        if isinstance(clearance_m, bool) or not (isinstance(clearance_m, (int, float))
                                                 and 0 <= clearance_m < math.inf):
            raise ValueError(f"clearance_m must be a finite number of metres >= 0, got "
                             f"{clearance_m!r}")
        weights = self._areas / self._areas.sum()
        found, tried = [], 0
        while sum(len(f) for f in found) < n:
            batch = max(64, 4 * n)
            tri = self.triangles[rng.choice(len(weights), size=batch, p=weights)]
            u, v = rng.random((2, batch, 1))
            flip = (u + v) > 1  # fold the far half of the parallelogram onto the triangle
            u, v = np.where(flip, 1 - u, u), np.where(flip, 1 - v, v)
            pts = tri[:, 0] + u * (tri[:, 1] - tri[:, 0]) + v * (tri[:, 2] - tri[:, 0])
            found.append(pts[self.wall_distance(pts) >= clearance_m] if clearance_m else pts)
            tried += batch
            if tried >= 10_000 and sum(len(f) for f in found) * 1000 < tried:
                raise ValueError(f"clearance_m={clearance_m!r}: fewer than 1 in 1000 points "
                                 f"of the area are that far from every wall")
        return np.concatenate(found)[:n]

    def grid(self, cell_m: float) -> tuple[np.ndarray, np.ndarray]:
        """(origin (2,), inside (rows, cols) bool): square cells of side `cell_m` from the
        lower bound, row = y, whose centre lies on the floor."""
        cell_m = _positive(cell_m, "cell_m")
        if cell_m not in self._grids:
            self._grids[cell_m] = self._grid(cell_m)
        origin, inside = self._grids[cell_m]
        return origin.copy(), inside.copy()

    def _grid(self, cell_m: float) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.bounds
        cols, rows = (max(1, int(v)) for v in np.ceil((hi - lo) / cell_m))
        inside = np.zeros((rows, cols), bool)
        for tri in self.triangles:  # each triangle tests only the cells of its bounding box
            (c0, r0), (c1, r1) = (((tri.min(0) - lo) / cell_m - 0.5).astype(int),
                                  ((tri.max(0) - lo) / cell_m + 0.5).astype(int))
            cc, rr = np.meshgrid(np.arange(max(c0, 0), min(c1, cols - 1) + 1),
                                 np.arange(max(r0, 0), min(r1, rows - 1) + 1))
            centres = lo + (np.stack([cc, rr], -1).reshape(-1, 2) + 0.5) * cell_m
            if len(centres):
                hit = in_triangles(centres, tri[None])
                inside[rr.ravel()[hit], cc.ravel()[hit]] = True
        return lo, inside


def area_from_grid(free, x0: float, cell: float, start_xy=None) -> ReachableArea:
    """The ReachableArea of an occupancy grid: `free` (rows = y, cols = x) bool, cell (i, j)
    spanning x0 + j cell .. x0 + (j + 1) cell in x (rows likewise in y). Floor: two
    triangles per free cell; walls: every cell edge between a free and a solid cell (the
    grid's border counts as solid)."""
    g = np.asarray(free)
    if g.ndim != 2 or g.dtype != bool or not g.any():
        raise ValueError(f"free must be a 2-D bool grid with a free cell, got {g.dtype} "
                         f"{g.shape}")
    cell = _positive(cell, "cell")
    rows, cols = np.nonzero(g)
    lo = np.stack([x0 + cols * cell, x0 + rows * cell], 1)  # (c, 2) lower-left corners
    dx, dy = np.array([cell, 0.0]), np.array([0.0, cell])
    tris = np.concatenate([np.stack([lo, lo + dx, lo + dx + dy], 1),
                           np.stack([lo, lo + dx + dy, lo + dy], 1)])
    padded = np.pad(g, 1)
    walls = []
    for axis in (0, 1):  # edges between rows (horizontal walls), then between columns
        edge = padded[1:, 1:-1] != padded[:-1, 1:-1] if axis == 0 else \
            padded[1:-1, 1:] != padded[1:-1, :-1]
        r, c = np.nonzero(edge)  # boundary below row r (axis 0) / left of column c (axis 1)
        a = np.stack([x0 + c * cell, x0 + r * cell], 1)
        walls.append(np.stack([a, a + (dx if axis == 0 else dy)], 1))
    return ReachableArea(tris, np.concatenate(walls), start_xy)


def in_triangles(points: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """(n,) bool: points (n, 2) inside or on the edge of any triangle (m, 3, 2)."""
    a = tris[None]  # (1, m, 3, 2) edges a -> b; either winding
    d = np.roll(tris, -1, axis=1)[None] - a
    inside = np.zeros(len(points), bool)
    step = max(1, _CHUNK // len(tris))
    for i in range(0, len(points), step):
        v = points[i:i + step, None, None, :] - a  # (n, m, 3, 2)
        cross = d[..., 0] * v[..., 1] - d[..., 1] * v[..., 0]  # (n, m, 3)
        inside[i:i + step] = ((cross >= -1e-9).all(-1) | (cross <= 1e-9).all(-1)).any(-1)
    return inside


def coverage(area: ReachableArea, positions_xy, radius_m: float = 1.0,
             cell_m: float = 0.5) -> dict:
    """How much of `area` lies within `radius_m` of the visited `positions_xy` (n, 2).

    Returns {"share_of_reachable_area": visited / reachable cells, "visited_cells",
    "reachable_cells"} over the area's grid of `cell_m` cells (see the module docstring).
    """
    radius_m, cell_m = _positive(radius_m, "radius_m"), _positive(cell_m, "cell_m")
    if np.size(positions_xy) == 0:
        raise ValueError("empty coverage set: positions_xy has no positions; expected (n, 2) "
                         "x, y in metres with n >= 1")
    p = _check_points(positions_xy, "positions_xy")
    origin, reachable = area.grid(cell_m)
    rows, cols = reachable.shape
    r = int(math.ceil(radius_m / cell_m)) + 1  # every cell a disk can reach, around its own
    off = np.stack(np.meshgrid(np.arange(-r, r + 1), np.arange(-r, r + 1)), -1).reshape(-1, 2)
    visited = np.zeros_like(reachable)
    step = max(1, _CHUNK // len(off))
    for i in range(0, len(p), step):
        q = p[i:i + step]
        cell = np.floor((q - origin) / cell_m).astype(np.int64)[:, None] + off  # (n, o, 2)
        centre = origin + (cell + 0.5) * cell_m
        near = ((centre - q[:, None]) ** 2).sum(-1) <= radius_m ** 2
        near &= (cell[..., 0] >= 0) & (cell[..., 0] < cols) & (cell[..., 1] >= 0) \
            & (cell[..., 1] < rows)
        visited[cell[..., 1][near], cell[..., 0][near]] = True
    n_reach, n_visit = int(reachable.sum()), int((visited & reachable).sum())
    return {"share_of_reachable_area": n_visit / n_reach, "visited_cells": n_visit,
            "reachable_cells": n_reach}


def coverage_figure(area: ReachableArea, positions_xy, title: str | None = None,
                    marker_size: float = 3.0):
    """Top-down plotly figure: the floor (grey), its walls (black), the visited positions
    coloured by their order, and the level's start (a star), with equal x and y scale."""
    import plotly.graph_objects as go  # here: engines do not need plotly to run

    p = _check_points(positions_xy, "positions_xy")
    fig = go.Figure()
    floor = np.full((len(area.triangles), 5, 2), np.nan)  # (m, corners + close + gap, 2)
    floor[:, :3], floor[:, 3] = area.triangles, area.triangles[:, 0]
    walls = np.full((len(area.walls), 3, 2), np.nan)  # (k, ends + gap, 2)
    walls[:, :2] = area.walls
    for xy, style in ((floor, dict(fill="toself", fillcolor="rgba(0,0,0,0.08)",
                                   line=dict(width=0), name="floor")),
                      (walls, dict(line=dict(color="black", width=1.5), name="walls"))):
        # a None between polygons or segments breaks the line (plotly's documented gap)
        x, y = ([None if math.isnan(v) else v for v in col] for col in xy.reshape(-1, 2).T)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", hoverinfo="skip", **style))
    fig.add_trace(go.Scatter(x=p[:, 0], y=p[:, 1], mode="markers", name="visited",
                             marker=dict(size=marker_size, color=np.arange(len(p)),
                                         colorscale="Viridis")))
    if area.start_xy is not None:
        fig.add_trace(go.Scatter(x=[area.start_xy[0]], y=[area.start_xy[1]], mode="markers",
                                 name="level start", marker=dict(symbol="star", size=12,
                                                                 color="red")))
    fig.update_layout(title=title, xaxis_title="x (m)", yaxis_title="y (m)",
                      yaxis=dict(scaleanchor="x", scaleratio=1), template="plotly_white")
    return fig
