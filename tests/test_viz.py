"""Figures carry the expected traces and ranges; image helpers are exact and lossless."""

import imageio.v3 as iio
import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from worldlab import camera as cam
from worldlab import viz


def test_set_renderer_is_json_only():
    old = pio.renderers.default
    try:
        assert viz.set_renderer() == "plotly_mimetype" == pio.renderers.default
        bundle = pio.renderers._build_mime_bundle(go.Figure().to_dict())  # what a cell saves
        assert set(bundle) == {"application/vnd.plotly.v1+json"}  # no plotly.js, no html
        with pytest.raises(ValueError, match="unknown plotly renderer 'nope'"):
            viz.set_renderer("nope")
    finally:
        pio.renderers.default = old


def test_trajectory_figure_traces_and_ranges():
    a = cam.leave_and_return([cam.Action(forward=0.5, yaw=10.0)] * 6)  # 13 poses, 6 revisits
    b = cam.straight(8, step_m=0.25)
    fig = viz.trajectory_figure([a, b.c2w], names=["there and back", "line"], cone_every=4,
                                cone_size=0.3)
    assert [t.name for t in fig.data] == ["there and back", "there and back view",
                                         "there and back revisits", "line", "line view"]
    line, cones, marks = fig.data[:3]
    np.testing.assert_allclose(np.c_[line.x, line.y, line.z], a.c2w[:, :3, 3])
    # cones at poses 0, 4, 8, 12 pointing along the camera +z axis, scaled to cone_size
    np.testing.assert_allclose(np.c_[cones.u, cones.v, cones.w], 0.3 * a.c2w[::4, :3, 2])
    assert len(marks.x) == len(a.revisits) == 6
    scene = fig.layout.scene
    assert scene.aspectmode == "data" and scene.camera.up.z == 1
    allpos = np.concatenate([a.c2w[:, :3, 3], b.c2w[:, :3, 3]])
    for k, axis in enumerate((scene.xaxis, scene.yaxis, scene.zaxis)):
        lo, hi = axis.range
        assert lo < allpos[:, k].min() and hi > allpos[:, k].max()
        assert hi - lo == pytest.approx(np.ptp(allpos[:, k]) + 2 * 0.5)  # pad = cone + 0.2


def test_trajectory_figure_explicit_revisits_and_bad_input():
    c2w = cam.turn_around(8).c2w
    fig = viz.trajectory_figure(c2w, revisits=[(0, 8), (1, 7)], cone_every=1)
    assert [t.name for t in fig.data] == ["trajectory 0", "trajectory 0 view",
                                         "trajectory 0 revisits"]
    assert len(fig.data[1].x) == 9 and list(fig.data[2].text)[1] == "step 7 revisits step 1"
    with pytest.raises(ValueError, match="cone_every must be a positive integer, got 0"):
        viz.trajectory_figure(c2w, cone_every=0)
    with pytest.raises(ValueError, match="got 1 names for 2 trajectories"):
        viz.trajectory_figure([c2w, c2w], names=["one"])
    with pytest.raises(ValueError, match=r"trajectory 0 must be \(t, 4, 4\), got \(4, 4\)"):
        viz.trajectory_figure(np.eye(4))


def test_rays_figure_rays_end_on_the_image_plane():
    h, w, every, depth = 6, 8, 2, 1.5
    K = cam.intrinsics_from_fov(w, h, 90.0)
    c2w = cam.pose_from_heading(np.array([1.0, 2.0, 1.5]), 30.0, -10.0)
    fig = viz.rays_figure(K, c2w, h, w, every=every, depth=depth)
    assert [t.name for t in fig.data] == ["rays", "image plane", "camera x right",
                                         "camera y down", "camera z forward"]
    xyz = np.array([fig.data[0].x, fig.data[0].y, fig.data[0].z], dtype=float).T  # (3n, 3)
    assert len(xyz) == 3 * (h // every) * (w // every)
    starts, ends = xyz[0::3], xyz[1::3]
    assert np.isnan(xyz[2::3]).all()  # breaks between segments
    np.testing.assert_allclose(starts, np.broadcast_to(c2w[:3, 3], starts.shape))
    uv, z = cam.project(ends, K, c2w)
    np.testing.assert_allclose(z, depth, atol=1e-12)
    np.testing.assert_allclose(uv, cam.pixel_grid(h, w)[::every, ::every].reshape(-1, 2),
                               atol=1e-9)
    plane = np.c_[fig.data[1].x, fig.data[1].y, fig.data[1].z]
    uv, _ = cam.project(plane, K, c2w)
    np.testing.assert_allclose(uv[:4], [[0, 0], [w, 0], [w, h], [0, h]], atol=1e-9)
    fwd = fig.data[4]
    np.testing.assert_allclose([fwd.x[1] - fwd.x[0], fwd.y[1] - fwd.y[0], fwd.z[1] - fwd.z[0]],
                               0.5 * depth * c2w[:3, 2])
    assert fig.layout.scene.aspectmode == "data"
    with pytest.raises(ValueError, match="depth must be finite and positive, got -1"):
        viz.rays_figure(K, c2w, h, w, depth=-1)


def test_plucker_figure_shows_the_six_channels():
    K = cam.intrinsics_from_fov(8, 6, 70.0)
    c2w = cam.pose_from_heading(np.array([0.5, 0.0, 1.0]), 45.0)
    fig = viz.plucker_figure(K, c2w, 6, 8)
    img = cam.plucker_image(K, c2w, 6, 8)
    assert len(fig.data) == 6
    for c, trace in enumerate(fig.data):
        np.testing.assert_allclose(np.asarray(trace.z), img[..., c])
    assert fig.layout.coloraxis.cmax == pytest.approx(np.abs(img).max())


def test_frame_grid_shapes_and_placement():
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, size=(5, 4, 6, 3), dtype=np.uint8)
    grid = viz.frame_grid(frames, cols=3, pad=1, pad_value=7)
    assert grid.shape == (2 * 5 - 1, 3 * 7 - 1, 3) and grid.dtype == np.uint8
    np.testing.assert_array_equal(grid[0:4, 0:6], frames[0])
    np.testing.assert_array_equal(grid[0:4, 7:13], frames[1])
    np.testing.assert_array_equal(grid[5:9, 7:13], frames[4])  # second row, second column
    assert (grid[4] == 7).all() and (grid[5:9, 14:] == 7).all()  # pad row, empty last cell
    assert viz.frame_grid(frames, cols=10, pad=0).shape == (4, 30, 3)  # one row of five
    np.testing.assert_array_equal(viz.frame_grid(frames[:1], cols=1), frames[0])


@pytest.mark.parametrize("frames, cols, match", [
    (np.zeros((2, 4, 4, 3), np.float32), 2, "must be non-empty uint8 .* float32"),
    (np.zeros((4, 4, 3), np.uint8), 2, r"\(n, h, w, 3\), got uint8 \(4, 4, 3\)"),
    (np.zeros((0, 4, 4, 3), np.uint8), 2, r"got uint8 \(0, 4, 4, 3\)"),
    (np.zeros((2, 4, 4, 3), np.uint8), 0, "got cols=0"),
])
def test_frame_grid_bad_input(frames, cols, match):
    with pytest.raises(ValueError, match=match):
        viz.frame_grid(frames, cols)


@pytest.mark.parametrize("shape", [(5, 7, 3), (5, 7), (3, 4, 4)])
def test_png_round_trip_is_lossless(shape):
    img = np.random.default_rng(1).integers(0, 256, size=shape, dtype=np.uint8)
    data = viz.to_png_bytes(img)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    np.testing.assert_array_equal(iio.imread(data, extension=".png"), img)


def test_show_image_scales_with_nearest_neighbour():
    img = np.random.default_rng(2).integers(0, 256, size=(3, 4, 3), dtype=np.uint8)
    shown = viz.show_image(img, scale=3)
    back = iio.imread(shown.data, extension=".png")
    assert back.shape == (9, 12, 3)
    np.testing.assert_array_equal(back[::3, ::3], img)
    np.testing.assert_array_equal(back[2::3, 2::3], img)
    with pytest.raises(ValueError, match="image must be uint8, got float64"):
        viz.show_image(img / 255.0)
    with pytest.raises(ValueError, match="scale must be a positive integer, got 0"):
        viz.show_image(img, scale=0)


def test_tradeoff_figure_places_every_row_and_shades_the_bar():
    rows = {"plain": {"psnr": 30.5, "sharp": 0.2, "ssim": 0.8},
            "critic": {"psnr": 27.0, "sharp": 0.65}}
    fig = viz.tradeoff_figure(rows, "psnr", "sharp", bar=(30.0, 0.7))
    (points,) = fig.data
    assert list(points.x) == [30.5, 27.0] and list(points.y) == [0.2, 0.65]
    assert list(points.text) == ["plain", "critic"]
    (box,) = fig.layout.shapes
    assert (box.x0, box.y0) == (30.0, 0.7) and box.x1 >= 30.5 and box.y1 > 0.7
    assert viz.tradeoff_figure(rows, "psnr", "sharp").layout.shapes == ()


@pytest.mark.parametrize("rows, match", [
    ({}, "no rows"),
    ({"a": {"psnr": 30.0}}, r"missing in \{'a': \['sharp'\]\}"),
    ({"a": {"psnr": 30.0, "sharp": "high"}}, "missing in"),
])
def test_tradeoff_figure_bad_rows(rows, match):
    with pytest.raises(ValueError, match=match):
        viz.tradeoff_figure(rows, "psnr", "sharp")


# ----------------------------------------------------------------------------------------
# Points in a scene, coverage masks
# ----------------------------------------------------------------------------------------


def test_add_points_refits_the_axes_to_the_points():
    path = cam.straight(8, step_m=0.25)  # about 2 m along one axis
    fig = viz.trajectory_figure(path)
    points = np.random.default_rng(0).uniform(-5, 5, (200, 3))  # far outside the path's box
    colors = np.random.default_rng(1).integers(0, 256, (200, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match="outside the figure's range"):
        viz.check_in_view(fig.add_scatter3d(x=points[:, 0], y=points[:, 1], z=points[:, 2]))
    fig = viz.add_points(viz.trajectory_figure(path), points, colors, name="cache")
    assert fig.data[-1].name == "cache" and fig.data[-1].marker.color[0] == \
        "rgb({},{},{})".format(*colors[0])
    assert viz.check_in_view(fig) is fig
    scene = fig.layout.scene
    for k, axis in enumerate((scene.xaxis, scene.yaxis, scene.zaxis)):
        lo = min(points[:, k].min(), path.c2w[:, k, 3].min())
        hi = max(points[:, k].max(), path.c2w[:, k, 3].max())
        np.testing.assert_allclose(axis.range, [lo - 0.2, hi + 0.2])


@pytest.mark.parametrize("points, colors, match", [
    (np.zeros((0, 3)), None, "non-empty"),
    (np.zeros((4, 2)), None, r"\(n, 3\)"),
    (np.zeros((4, 3)), np.zeros((4, 3)), "colors must be uint8"),
    (np.zeros((4, 3)), np.zeros((3, 3), np.uint8), "colors must be uint8"),
])
def test_add_points_bad_input(points, colors, match):
    fig = viz.trajectory_figure(cam.straight(4, step_m=0.25))
    n = len(fig.data)
    with pytest.raises(ValueError, match=match):
        viz.add_points(fig, points, colors)
    assert len(fig.data) == n  # nothing added


def test_mask_image_is_never_the_page_colour():
    mask = np.zeros((4, 5), bool)
    mask[1:3, 2:] = True
    img = viz.mask_image(mask)
    assert img.shape == (4, 5, 3) and img.dtype == np.uint8
    assert (img[mask] == viz.MASK_COLORS[1]).all() and (img[~mask] == viz.MASK_COLORS[0]).all()
    for tile in (viz.mask_image(np.ones((3, 3), bool)), viz.mask_image(np.zeros((3, 3), bool))):
        assert not (tile == 255).all(-1).any() and not (tile == 0).all(-1).any()  # white, black
    with pytest.raises(ValueError, match="boolean"):
        viz.mask_image(mask.astype(np.uint8))


# ----------------------------------------------------------------------------------------
# Live loss: one figure, redrawn in place
# ----------------------------------------------------------------------------------------


def test_live_loss_records_every_state_outside_ipython():
    live = viz.LiveLoss(every=10)
    a, b = live.callback("a", total=25), live.callback("b")
    for step in range(1, 26):
        a({"step": step, "loss": 1.0 / step})
    for step in range(1, 8):
        b({"step": step, "loss": 2.0})
    assert [len(log) for log in live.logs.values()] == [25, 7]
    live.redraw()
    assert [t.name for t in live.fig.data] == ["a", "b"]
    assert list(live.fig.data[0].x) == list(range(1, 26))
    np.testing.assert_allclose(live.fig.data[0].y, [1.0 / s for s in range(1, 26)])
    with pytest.raises(ValueError, match="'a' is already drawn"):
        live.callback("a")
    with pytest.raises(ValueError, match="every must be a positive integer"):
        viz.LiveLoss(every=0)


LIVE_CELLS = ['''import worldlab as wl
wl.viz.set_renderer()
live = wl.viz.LiveLoss(every=5)
cb = live.callback("loss", total=47)''', '''for step in range(1, 48):
    cb({"step": step, "loss": 1.0 / step})''']


def test_live_loss_in_a_kernel_leaves_one_output_with_every_point():
    """Executed in a real kernel: 47 states, 10 redraws, one figure output in the cell that
    first drew it (the loop's), holding all 47 points (the old pattern left 10 copies)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in LIVE_CELLS])
    nbclient.NotebookClient(nb, kernel_name="worldlab", timeout=120).execute()
    outputs = [o for c in nb.cells for o in c.outputs]
    plots = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(plots) == 1 and len(nb.cells[1].outputs) == 1 and nb.cells[0].outputs == []
    (trace,) = plots[0]["data"]["application/vnd.plotly.v1+json"]["data"]
    assert list(trace["x"]) == list(range(1, 48)) and trace["name"] == "loss"


def test_stack_figures_makes_one_figure_of_rows_and_leaves_its_inputs_alone():
    line = go.Figure([go.Scatter(x=[1, 2], y=[3, 4], name="world"),
                      go.Scatter(x=[1, 2], y=[2, 2], name="repeat")],
                     layout=dict(title="drift", xaxis_title="frame", yaxis_title="PSNR (dB)"))
    bars = go.Figure([go.Bar(x=["yaw"], y=[1.2], name="world")], layout=dict(title="camera"))
    before = [line.to_plotly_json(), bars.to_plotly_json()]
    fig = viz.stack_figures([line, bars])
    assert [line.to_plotly_json(), bars.to_plotly_json()] == before
    assert [a.text for a in fig.layout.annotations] == ["drift", "camera"]
    assert [(t.name, t.yaxis, t.showlegend) for t in fig.data] == [
        ("world", "y", True), ("repeat", "y", True), ("world", "y2", False)]
    assert fig.data[0].line.color == fig.data[2].marker.color  # one colour per name's slot
    assert fig.layout.yaxis.title.text == "PSNR (dB)" and fig.layout.xaxis.title.text == "frame"
    with pytest.raises(ValueError, match="single-plot scatter and bar"):
        viz.stack_figures([go.Figure(go.Scatter3d(x=[0], y=[0], z=[0]))])
    with pytest.raises(ValueError, match="non-empty list"):
        viz.stack_figures([])


def test_scenes_side_by_side_keeps_each_scene_fitted_to_its_points():
    rng = np.random.default_rng(0)
    figs = {}
    for name, spread in (("doom", 2.0), ("procedural", 20.0)):
        c2w = np.repeat(np.eye(4)[None], 3, 0)
        fig = viz.trajectory_figure(c2w, names=[name])
        figs[name] = viz.add_points(fig, rng.uniform(-spread, spread, (50, 3)))
    out = viz.scenes_side_by_side(figs)
    assert out.layout.scene.xaxis.range[1] < 3 < out.layout.scene2.xaxis.range[1]
    assert out.layout.scene.domain.x[1] <= out.layout.scene2.domain.x[0]
    out.layout.scene2.xaxis.range = [0, 1]
    with pytest.raises(ValueError, match="outside the figure's range"):
        viz.check_in_view(out)


def test_interval_figure_draws_each_interval_around_its_mean():
    rows = {"geo - none": {"mean": 1.5, "lo": 0.5, "hi": 2.0},
            "none - warp-last": {"mean": -0.2, "lo": -0.9, "hi": 0.4}}
    fig = viz.interval_figure(rows, "paired")
    bars = fig.data[0]
    assert list(bars.y) == ["none - warp-last", "geo - none"]  # the first row on top
    assert list(bars.x) == [-0.2, 1.5]
    assert list(bars.error_x.array) == pytest.approx([0.6, 0.5])
    assert list(bars.error_x.arrayminus) == pytest.approx([0.7, 1.0])
    with pytest.raises(ValueError, match="missing in \\['x'\\]"):
        viz.interval_figure({"x": {"mean": 1.0, "lo": None, "hi": 2.0}})
    with pytest.raises(ValueError, match="no rows"):
        viz.interval_figure({})


def test_gate_figure_draws_a_line_per_run_and_gate():
    runs = {"retrieval": {"memory_gate_norm": [[1, 0.0], [10, 0.4], [20, 0.9]]},
            "cache3d_own": {"cache_gate_norm": [[1, 0.0], [20, 0.3]]}, "none": {}}
    fig = viz.gate_figure(runs)
    assert [t.name for t in fig.data] == ["retrieval: memory", "cache3d_own: cache"]
    assert list(fig.data[0].x) == [1, 10, 20] and list(fig.data[0].y) == [0.0, 0.4, 0.9]
    with pytest.raises(ValueError, match="none: gate 'cache_gate_norm' needs"):
        viz.gate_figure({"none": {"cache_gate_norm": [[1, 0.0, 3]]}})
