"""Long horizon: a long open-loop walk against drift-free and autoencoder references
(`evaluate.long`). It streams with the world's KV cache, so it scores the world alone.

Section: long (`long.long_horizon`'s result + psnr_late interval, models, note).
"""

from __future__ import annotations

from ..stats import bootstrap
from ..long import long_horizon
from ..protocols import heldout_episodes
from .base import Protocol, Row, SuiteRun
from .walks import walk_options


def _run(run: SuiteRun) -> tuple[dict, dict]:
    s = run.sizes
    walks = heldout_episodes(run.engine, s.long_walks, s.long_frames, run.world.size, "mix",
                             seed=s.seed, **walk_options(run.engine))
    lh = long_horizon(run.world, walks)
    return {"long": {**lh, "psnr_late": bootstrap(lh["psnr_late_per_walk"]),
                     "models": ["world"],
                     "note": "streams with the world's KV cache: the world only"}}, {}


def _rows(result: dict) -> list[Row]:
    lh = result["long"]
    return [("long horizon", f"PSNR, last 100 of {lh['frames']} frames (dB)",
             {"world": lh["psnr_late"], "repeat": lh.get("psnr_repeat_late")})]


def _figures(result: dict) -> list:
    import plotly.graph_objects as go

    c = result["long"]["curves"]
    fig = go.Figure([go.Scatter(x=c["frame"], y=c[k], name=k.replace("psnr_", ""))
                     for k in ("psnr_open_loop", "psnr_drift_free", "psnr_autoencoder",
                               "psnr_repeat")])
    fig.update_layout(title="long horizon: PSNR along the walk", xaxis_title="frame",
                      yaxis_title="PSNR (dB)")
    return [fig]


PROTOCOL = Protocol("long", "long horizon", ("long",), _run, _rows, _figures)
