"""Figures and images for notebooks: camera trajectories, rays, Plücker images, frame grids,
coverage masks, point clouds in a scene, and live loss curves redrawn in place.

Every 3D figure is drawn in the world frame of `camera.py` (metres, +z up) with equal scale
on all axes, so a 90-degree turn looks like one. Images are uint8 (h, w, 3) or (h, w).

Shape names: t time, n frames, h w height width.
"""

from __future__ import annotations

import base64
import math

import imageio.v3 as iio
import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from . import camera

# ----------------------------------------------------------------------------------------
# Renderer: chosen in one place
# ----------------------------------------------------------------------------------------

# "plotly_mimetype" stores only the figure JSON (application/vnd.plotly.v1+json) in a cell's
# output. JupyterLab draws it with the jupyterlab-plotly extension that ships inside the
# plotly wheel, offline, and VS Code draws it too. The "notebook" renderers instead embed the
# 4.8 MB plotly.js bundle in the saved notebook, and the "*_connected" ones fetch it from a
# CDN this machine cannot reach. Papermill keeps the JSON in executed copies under runs/.
RENDERER = "plotly_mimetype"

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")
AXIS_COLORS = ("#d62728", "#2ca02c", "#1f77b4")  # camera x right, y down, z forward


def set_renderer(name: str = RENDERER) -> str:
    """Make `name` plotly's default renderer (see RENDERER for why); returns it."""
    if name not in pio.renderers:
        raise ValueError(f"unknown plotly renderer {name!r}; expected one of "
                         f"{list(pio.renderers)}")
    pio.renderers.default = name
    return name


# ----------------------------------------------------------------------------------------
# 3D scenes in world coordinates
# ----------------------------------------------------------------------------------------


def _scene_layout(fig: go.Figure, points: np.ndarray, pad: float = 0.5) -> go.Figure:
    """Axis ranges around `points` (n, 3), z up, and equal metres per screen unit."""
    points = points[np.isfinite(points).all(-1)]
    if not len(points):
        raise ValueError("a 3D figure needs at least one finite point to fit its axes to")
    lo, hi = points.min(0) - pad, points.max(0) + pad
    fig.update_layout(
        scene=dict(xaxis=dict(title="x (m)", range=[lo[0], hi[0]]),
                   yaxis=dict(title="y (m)", range=[lo[1], hi[1]]),
                   zaxis=dict(title="z (m)", range=[lo[2], hi[2]]),
                   # 'data': the axes are drawn in proportion to their ranges
                   aspectmode="data", camera=dict(up=dict(x=0, y=0, z=1))),
        margin=dict(l=0, r=0, t=30, b=0), legend=dict(x=0, y=1))
    return fig


def _as_trajectories(trajectories, names) -> list[tuple[str, np.ndarray, list]]:
    """(name, c2w (t, 4, 4), revisits) for a Trajectory, an array, or a list of either."""
    if isinstance(trajectories, (camera.Trajectory, np.ndarray)):
        trajectories = [trajectories]
    if names is not None and len(names) != len(trajectories):
        raise ValueError(f"got {len(names)} names for {len(trajectories)} trajectories")
    out = []
    for i, tr in enumerate(trajectories):
        default, revisits = f"trajectory {i}", []
        if isinstance(tr, camera.Trajectory):
            default, revisits, tr = tr.name, tr.revisits, tr.c2w
        c2w = camera.check_c2w(tr, f"trajectory {i}")
        if c2w.ndim != 3:
            raise ValueError(f"trajectory {i} must be (t, 4, 4), got {c2w.shape}")
        out.append((default if names is None else names[i], c2w, list(revisits)))
    return out


def _cones(c2w: np.ndarray, every: int, size: float, color: str, name: str) -> go.Cone:
    """Cones at every `every`-th pose pointing along the camera's +z (viewing) axis."""
    sel = c2w[::every]  # (t', 4, 4)
    pos, fwd = sel[:, :3, 3], sel[:, :3, 2] * size  # (t', 3) each
    return go.Cone(x=pos[:, 0], y=pos[:, 1], z=pos[:, 2], u=fwd[:, 0], v=fwd[:, 1], w=fwd[:, 2],
                   anchor="tail", sizemode="raw", sizeref=1.0, showscale=False,  # length = size
                   colorscale=[[0, color], [1, color]], name=f"{name} view", showlegend=False,
                   hovertemplate=f"{name} view<extra></extra>")


def trajectory_figure(trajectories, names=None, cone_every: int = 4, cone_size: float = 0.3,
                      revisits=None, title: str | None = None) -> go.Figure:
    """Camera paths seen from above: a line per trajectory, cones for the view direction.

    trajectories: c2w (t, 4, 4), a `camera.Trajectory`, or a list of them. revisits: (i, j)
    pose pairs of the first trajectory to mark; by default each Trajectory's own.
    """
    if not (isinstance(cone_every, int) and cone_every > 0):
        raise ValueError(f"cone_every must be a positive integer, got {cone_every!r}")
    items = _as_trajectories(trajectories, names)
    if revisits is not None:
        items[0] = (items[0][0], items[0][1], list(revisits))
    fig = go.Figure()
    for k, (name, c2w, pairs) in enumerate(items):
        color, pos = COLORS[k % len(COLORS)], c2w[:, :3, 3]  # (t, 3)
        fig.add_trace(go.Scatter3d(x=pos[:, 0], y=pos[:, 1], z=pos[:, 2], mode="lines+markers",
                                   name=name, line=dict(color=color, width=4),
                                   marker=dict(size=2, color=color),
                                   text=[f"step {i}" for i in range(len(pos))]))
        fig.add_trace(_cones(c2w, cone_every, cone_size, color, name))
        if pairs:
            j = np.array([b for _, b in pairs])
            fig.add_trace(go.Scatter3d(
                x=pos[j, 0], y=pos[j, 1], z=pos[j, 2], mode="markers", name=f"{name} revisits",
                marker=dict(size=5, symbol="diamond-open", color=color),
                text=[f"step {b} revisits step {a}" for a, b in pairs]))
    allpos = np.concatenate([c2w[:, :3, 3] for _, c2w, _ in items])
    fig.update_layout(title=title)
    return _scene_layout(fig, allpos, pad=cone_size + 0.2)


def _coordinates(values) -> np.ndarray:
    """A trace's x, y or z as floats (n,): a list with None gaps, an array, or the typed
    array {"dtype", "bdata"} that plotly writes numpy arrays as in a saved figure."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), values["dtype"]).astype(float)
    return np.array([np.nan if v is None else v for v in values], float)


def _scene_points(fig: go.Figure) -> dict[str, dict[str, np.ndarray]]:
    """scene -> trace name -> its finite points (n, 3), for every 3D trace of `fig`
    (cones: the tails); a figure of several scenes (`scenes_side_by_side`) has one each."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for k, trace in enumerate(fig.data):
        if trace.type not in ("scatter3d", "cone") or trace.x is None:
            continue
        xyz = np.stack([_coordinates(c) for c in (trace.x, trace.y, trace.z)], -1)  # (n, 3)
        scene = out.setdefault(trace.scene or "scene", {})
        scene[trace.name or f"trace {k}"] = xyz[np.isfinite(xyz).all(-1)]
    return out


def add_points(fig: go.Figure, points, colors=None, name: str = "points",
               size: float = 1.5, pad: float = 0.2) -> go.Figure:
    """Add coloured 3D points (n, 3) [colours (n, 3) uint8] to a scene figure and refit its
    axes to everything it draws: the ranges a figure was made with (e.g. a camera path's)
    would otherwise cut the points off, and a scene of empty axes looks like an empty cache."""
    points = np.asarray(points, float)
    if points.ndim != 2 or points.shape[1] != 3 or not len(points):
        raise ValueError(f"points must be a non-empty (n, 3) array, got {points.shape}")
    marker = dict(size=size)
    if colors is not None:
        colors = np.asarray(colors)
        if colors.shape != points.shape or colors.dtype != np.uint8:
            raise ValueError(f"colors must be uint8 {points.shape} like the points, got "
                             f"{colors.dtype} {colors.shape}")
        marker["color"] = [f"rgb({r},{g},{b})" for r, g, b in colors]
    fig.add_trace(go.Scatter3d(x=points[:, 0], y=points[:, 1], z=points[:, 2], mode="markers",
                               marker=marker, name=name))
    _scene_layout(fig, np.concatenate(list(_scene_points(fig)["scene"].values())), pad=pad)
    return check_in_view(fig)


def scenes_side_by_side(figs: dict[str, go.Figure]) -> go.Figure:
    """Several 3D figures (title -> figure) as one, side by side, each scene keeping its own
    axes: one output where a loop would show one figure per engine."""
    if not figs or not all(isinstance(f, go.Figure) for f in figs.values()):
        raise ValueError(f"figs must map titles to plotly figures, got {figs!r:.80}")
    out = make_subplots(rows=1, cols=len(figs), specs=[[{"type": "scene"}] * len(figs)],
                        subplot_titles=list(figs), horizontal_spacing=0.02)
    for k, fig in enumerate(figs.values(), start=1):
        for trace in fig.data:
            out.add_trace(trace, row=1, col=k)
        # the scene's ranges, aspect and camera; its domain stays the subplot's
        out.layout["scene" if k == 1 else f"scene{k}"].update(
            {key: v for key, v in fig.layout.scene.to_plotly_json().items() if key != "domain"})
    out.update_layout(margin=dict(l=0, r=0, t=40, b=0), height=450)
    return check_in_view(out)


def stack_figures(figs: list[go.Figure], height_each: int = 320) -> go.Figure:
    """Single-plot 2D figures as one, a row each under its own title: one output where a
    loop would show one figure per protocol. A trace keeps the colour it had in its own
    figure, and a name shares one legend entry across rows."""
    if not figs or not all(isinstance(f, go.Figure) for f in figs):
        raise ValueError(f"figs must be a non-empty list of plotly figures, got {figs!r:.80}")
    for fig in figs:
        axes = [k for k in fig.layout.to_plotly_json() if k.startswith(("xaxis", "yaxis"))]
        if any(t.type not in ("scatter", "bar") for t in fig.data) or len(axes) > 2:
            raise ValueError(f"stack_figures takes single-plot scatter and bar figures; "
                             f"{fig.layout.title.text!r} has traces "
                             f"{sorted({t.type for t in fig.data})} on axes {axes}")
    out = make_subplots(rows=len(figs), cols=1, vertical_spacing=0.25 / len(figs),
                        subplot_titles=[f.layout.title.text or "" for f in figs])
    shown = set()
    for row, fig in enumerate(figs, start=1):
        for k, trace in enumerate(fig.data):
            trace = go.Figure(trace).data[0]  # a copy: the caller's figure stays as it was
            color = COLORS[k % len(COLORS)]
            if trace.marker.color is None:
                trace.marker.color = color
            if trace.type == "scatter" and trace.line.color is None:
                trace.line.color = color
            trace.legendgroup = trace.name
            trace.showlegend = trace.showlegend is not False and trace.name not in shown
            shown.add(trace.name)
            out.add_trace(trace, row=row, col=1)
        out.update_xaxes(title_text=fig.layout.xaxis.title.text, row=row, col=1)
        out.update_yaxes(title_text=fig.layout.yaxis.title.text, row=row, col=1)
    return out.update_layout(height=height_each * len(figs), barmode=figs[0].layout.barmode)


def check_in_view(fig: go.Figure) -> go.Figure:
    """`fig` if every point of its 3D traces lies inside its scene's axis ranges; else a
    ValueError naming the trace, the axis and how far out it reaches (a trace drawn outside
    the ranges is invisible: the figure looks right and shows nothing)."""
    for scene, traces in _scene_points(fig).items():
        layout = fig.layout[scene]
        for name, xyz in traces.items():
            for k, axis in enumerate(("xaxis", "yaxis", "zaxis")):
                rng = layout[axis].range
                if rng is None or not len(xyz):
                    continue
                lo, hi = xyz[:, k].min(), xyz[:, k].max()
                if lo < rng[0] or hi > rng[1]:
                    raise ValueError(f"trace {name!r} spans {axis[0]} = [{lo:.3g}, {hi:.3g}] "
                                     f"outside the figure's range [{rng[0]:.3g}, {rng[1]:.3g}]")
    return fig


def _segments(starts: np.ndarray, ends: np.ndarray) -> dict:
    """x, y, z of one Scatter3d drawing n separate segments (n, 3) -> (3n,) each.

    A None after each segment breaks the line (plain lists: plotly sends numpy arrays as
    binary blobs, where only a null is a documented gap).
    """
    xyz = np.full((len(starts), 3, 3), np.nan)  # (segment, start/end/break, xyz)
    xyz[:, 0], xyz[:, 1] = starts, ends
    x, y, z = ([None if math.isnan(v) else v for v in col] for col in xyz.reshape(-1, 3).T)
    return dict(x=x, y=y, z=z)


def rays_figure(K, c2w, height: int, width: int, every: int = 4,
                depth: float = 1.0) -> go.Figure:
    """The rays of one camera: through every `every`-th pixel centre up to z-depth `depth`.

    The rays end on the image plane at that depth (drawn as a rectangle spanning [0, W] x
    [0, H]); the camera axes are drawn x red, y green, z blue (OpenCV: right, down, forward).
    """
    if not (isinstance(every, int) and every > 0):
        raise ValueError(f"every must be a positive integer, got {every!r}")
    if not (np.isfinite(depth) and depth > 0):
        raise ValueError(f"depth must be finite and positive, got {depth!r}")
    c2w = camera.check_c2w(c2w)
    origins, dirs = camera.ray_directions(K, c2w, height, width, normalize=False)  # (h, w, 3)
    o, d = origins[::every, ::every].reshape(-1, 3), dirs[::every, ::every].reshape(-1, 3)
    fig = go.Figure()
    fig.add_trace(go.Scatter3d(**_segments(o, o + depth * d), mode="lines", name="rays",
                               line=dict(color="#ff7f0e", width=2)))
    corners = np.array([[0, 0], [width, 0], [width, height], [0, height], [0, 0]], float)
    plane = camera.unproject(corners, np.full(5, depth), K, c2w)  # (5, 3)
    fig.add_trace(go.Scatter3d(x=plane[:, 0], y=plane[:, 1], z=plane[:, 2], mode="lines",
                               name="image plane", line=dict(color="black", width=3)))
    centre, axes = c2w[:3, 3], c2w[:3, :3].T * 0.5 * depth  # axes: rows x, y, z (3, 3)
    for axis, name, color in zip(axes, ("x right", "y down", "z forward"), AXIS_COLORS):
        seg = np.stack([centre, centre + axis])
        fig.add_trace(go.Scatter3d(x=seg[:, 0], y=seg[:, 1], z=seg[:, 2], mode="lines",
                                   name=f"camera {name}", line=dict(color=color, width=6)))
    return _scene_layout(fig, np.concatenate([o + depth * d, plane, centre[None]]), pad=0.2)


def plucker_figure(K, c2w, height: int, width: int) -> go.Figure:
    """The six Plücker channels (direction d, moment o x d) of a camera as heatmaps."""
    img = camera.plucker_image(K, c2w, height, width)  # (h, w, 6)
    labels = ("d x", "d y", "d z", "m x", "m y", "m z")
    fig = make_subplots(rows=2, cols=3, subplot_titles=labels, horizontal_spacing=0.04,
                        vertical_spacing=0.1)
    for c, label in enumerate(labels):
        row, col = c // 3 + 1, c % 3 + 1
        fig.add_trace(go.Heatmap(z=img[..., c], coloraxis="coloraxis", name=label), row, col)
        # square pixels, row 0 on top: each y axis keeps the scale of its own x axis
        fig.update_yaxes(scaleanchor=f"x{c + 1 if c else ''}", row=row, col=col)
    lim = float(np.abs(img).max())
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    fig.update_layout(coloraxis=dict(colorscale="RdBu", cmin=-lim, cmax=lim),
                      margin=dict(l=0, r=0, t=30, b=0))
    return fig


# ----------------------------------------------------------------------------------------
# Images
# ----------------------------------------------------------------------------------------


def _check_image(img, name: str = "image") -> np.ndarray:
    img = np.asarray(img)
    if img.dtype != np.uint8:
        raise ValueError(f"{name} must be uint8, got {img.dtype}")
    if not (img.ndim == 2 or (img.ndim == 3 and img.shape[-1] in (3, 4))):
        raise ValueError(f"{name} must be (h, w), (h, w, 3) or (h, w, 4), got {img.shape}")
    return img


def frame_grid(frames, cols: int, pad: int = 1, pad_value: int = 255) -> np.ndarray:
    """Tile frames (n, h, w, 3) uint8 into one image, `cols` per row, `pad` pixels apart.

    Returns (rows * (h + pad) - pad, cols * (w + pad) - pad, 3) uint8 with
    rows = ceil(n / cols); empty cells of the last row are filled with `pad_value`.
    """
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or not len(frames):
        raise ValueError(f"frames must be non-empty uint8 (n, h, w, 3), got {frames.dtype} "
                         f"{frames.shape}")
    if not (isinstance(cols, int) and cols > 0) or not (isinstance(pad, int) and pad >= 0):
        raise ValueError(f"cols must be a positive and pad a non-negative integer, got "
                         f"cols={cols!r}, pad={pad!r}")
    n, h, w, _ = frames.shape
    cols = min(cols, n)
    rows = math.ceil(n / cols)
    grid = np.full((rows * (h + pad) - pad, cols * (w + pad) - pad, 3), pad_value, np.uint8)
    for i, frame in enumerate(frames):
        r, c = divmod(i, cols)
        grid[r * (h + pad): r * (h + pad) + h, c * (w + pad): c * (w + pad) + w] = frame
    return grid


# viridis' two ends: a coverage mask drawn in them is visible on a white and a black page
# alike (white = covered put a fully covered tile on a white page out of sight)
MASK_COLORS = ((68, 1, 84), (253, 231, 37))  # (hole, covered) RGB


def mask_image(mask) -> np.ndarray:
    """A boolean mask (h, w) as a uint8 (h, w, 3) image: holes dark purple, covered yellow."""
    mask = np.asarray(mask)
    if mask.ndim != 2 or mask.dtype != bool:
        raise ValueError(f"mask must be a boolean (h, w) array, got {mask.dtype} {mask.shape}")
    return np.asarray(MASK_COLORS, np.uint8)[mask.astype(np.intp)]  # (h, w, 3)


def to_png_bytes(img) -> bytes:
    """Lossless PNG encoding of a uint8 image (h, w), (h, w, 3) or (h, w, 4)."""
    return iio.imwrite("<bytes>", _check_image(img), extension=".png")


def show_image(img, scale: int = 1):
    """An IPython Image of `img`, enlarged `scale` times with nearest-neighbour pixels.

    64x64 frames are tiny on screen; nearest-neighbour keeps every pixel visible as-is.
    """
    from IPython.display import Image

    if not (isinstance(scale, int) and scale > 0):
        raise ValueError(f"scale must be a positive integer, got {scale!r}")
    img = _check_image(img)
    img = img.repeat(scale, axis=0).repeat(scale, axis=1)  # (h * scale, w * scale, ...)
    return Image(data=to_png_bytes(img), format="png")


# ----------------------------------------------------------------------------------------
# Trade-offs between two scores
# ----------------------------------------------------------------------------------------


def tradeoff_figure(rows: dict, x: str, y: str, bar: tuple[float, float] | None = None,
                    x_title: str | None = None, y_title: str | None = None) -> go.Figure:
    """One labelled point per row of a results table: rows {name: {x: value, y: value, ...}}.

    `bar` (x at least, y at least) shades the region that meets both, so a reader sees how far
    each row is from it and in which direction the rows trade one score for the other.
    """
    missing = {name: [k for k in (x, y) if not isinstance(row.get(k), (int, float))]
               for name, row in rows.items()}
    missing = {name: keys for name, keys in missing.items() if keys}
    if not rows or missing:
        raise ValueError(f"every row needs numbers {x!r} and {y!r}; "
                         f"{'no rows' if not rows else f'missing in {missing}'}")
    names = list(rows)
    xs, ys = [float(rows[n][x]) for n in names], [float(rows[n][y]) for n in names]
    fig = go.Figure(layout=dict(xaxis_title=x_title or x, yaxis_title=y_title or y,
                                height=380, showlegend=False))
    if bar is not None:
        x0, y0 = bar
        top, right = max(ys + [y0]) * 1.1, max(xs + [x0]) * 1.02
        fig.add_shape(type="rect", x0=x0, x1=right, y0=y0, y1=top, line_width=0,
                      fillcolor="rgba(44, 160, 44, 0.15)")
        fig.add_annotation(x=right, y=top, text="meets both bars", showarrow=False,
                           xanchor="right", yanchor="top")
    fig.add_scatter(x=xs, y=ys, mode="markers+text", text=names, textposition="top center",
                    marker=dict(size=10, color=COLORS[0]))
    return fig


def interval_figure(rows: dict, title: str = "", x_title: str = "dB") -> go.Figure:
    """One horizontal bar per row {label: {"mean", "lo", "hi"}} (a paired difference with
    its 95% interval, or a score), a line at zero: a difference whose whole interval sits
    on one side of it is one the walks can tell."""
    bad = [k for k, r in rows.items() if not all(isinstance(r.get(q), (int, float))
                                                   for q in ("mean", "lo", "hi"))]
    if not rows or bad:
        raise ValueError(f"every row needs numbers mean, lo and hi; "
                         f"{'no rows' if not rows else f'missing in {bad}'}")
    labels = list(rows)[::-1]  # the first row on top
    mean = [rows[k]["mean"] for k in labels]
    fig = go.Figure(layout=dict(title=title, xaxis_title=x_title, showlegend=False,
                                height=120 + 36 * len(labels), margin=dict(l=260)))
    fig.add_scatter(x=mean, y=labels, mode="markers", marker=dict(size=9, color=COLORS[0]),
                    error_x=dict(type="data", symmetric=False,
                                 array=[rows[k]["hi"] - rows[k]["mean"] for k in labels],
                                 arrayminus=[rows[k]["mean"] - rows[k]["lo"] for k in labels]))
    fig.add_vline(x=0, line_dash="dot", line_color="grey")
    return fig


def gate_figure(runs: dict, title: str = "memory gates over fine-tuning") -> go.Figure:
    """One line per run and gate, {run: {gate: [[step, norm], ...]}} (`train.tracked.
    gate_curves`, the recall table's `gates`): a gate that stays near zero is a memory the
    run learned to ignore. A run without gates draws nothing."""
    fig = go.Figure(layout=dict(title=title, xaxis_title="step", yaxis_title="gate norm",
                                height=360))
    for run, gates in runs.items():
        for gate, points in gates.items():
            if not points or any(len(p) != 2 for p in points):
                raise ValueError(f"{run}: gate {gate!r} needs [[step, norm], ...], got "
                                 f"{points[:3]!r}")
            steps, norms = zip(*points)
            fig.add_scatter(x=steps, y=norms, mode="lines",
                            name=f"{run}: {gate.removesuffix('_gate_norm')}")
    return fig


# ----------------------------------------------------------------------------------------
# Live training curves: one figure, redrawn in place
# ----------------------------------------------------------------------------------------


class LiveLoss:
    """One figure of training losses that a training loop redraws in place, a line per run.

        live = wl.viz.LiveLoss("training loss (live)")
        run = wl.train.autoencoder(store, cfg, out, callbacks=[live.callback("loss", cfg.steps)])
        live.logs["loss"]  # every state the loop reported

    A go.Figure shown with `display(fig, display_id=True)` ignores the id (plotly shows itself
    through `_ipython_display_`), so every `handle.update` appended one more copy. Here the
    figure's mime bundle is published raw under one display id and replaced on each redraw:
    one output, wherever the cell that drew it first is. Outside IPython it only records.
    """

    def __init__(self, title: str = "training loss (live)", every: int = 10, key: str = "loss",
                 height: int = 300, log_y: bool = True):
        if not (isinstance(every, int) and every > 0):
            raise ValueError(f"every must be a positive integer, got {every!r}")
        self.every, self.key = every, key
        self.fig = go.Figure(layout=dict(title=title, xaxis_title="step", yaxis_title=key,
                                         yaxis_type="log" if log_y else "linear",
                                         height=height))
        self.logs: dict[str, list[dict]] = {}
        self._handle = None

    def callback(self, name: str = "loss", total: int | None = None):
        """A `fit` callback that records each state under `name` (a line of its own) and
        redraws every `every` steps and at step `total`."""
        if name in self.logs:
            raise ValueError(f"a line named {name!r} is already drawn; names: {list(self.logs)}")
        self.fig.add_scatter(x=[], y=[], mode="lines", name=name)
        log = self.logs.setdefault(name, [])

        def record(state: dict) -> None:
            log.append(state)
            if state["step"] % self.every == 0 or state["step"] == total:
                self.redraw()
        return record

    def redraw(self) -> None:
        """Copy the logs into the figure; show it the first time, replace that output after."""
        from IPython import get_ipython
        from IPython.display import display

        for trace, log in zip(self.fig.data, self.logs.values()):  # one line per log, in order
            trace.x, trace.y = [s["step"] for s in log], [s[self.key] for s in log]
        if get_ipython() is None:  # a script or a test: nothing to draw on
            return
        bundle = self.fig._repr_mimebundle_()  # the default renderer's mime types
        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)
        else:
            self._handle.update(bundle, raw=True)
