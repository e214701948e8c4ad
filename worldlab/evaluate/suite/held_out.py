"""Next chunk, drift and camera following for every model on the same held-out walks
(`protocols.next_chunk`, `protocols.drift_scores`, `camera_follow`), with 95% bootstrap
intervals over walks. `generalisation` runs the same on unseen walks through
`psnr_section`, `camera`, `psnr_rows` and `drift_figure`.

Sections: next_chunk {model: scores}, drift {model: scores}, camera {model: scores} (or
{"skipped": why}), walks {count, frames, seeds}.
"""

from __future__ import annotations

from ...model.probes import MOTION_FIELDS
from ...train.probes import motion_usable
from ..camera_follow import camera_scores
from ..stats import bootstrap
from ..predictors import RepeatPredictor
from ..protocols import drift_scores, next_chunk, open_loop
from .base import Protocol, Row, SuiteRun, cell
from .walks import strip, suite_walks


def psnr_section(models: dict, episodes, sizes) -> tuple[dict, dict]:
    """Next chunk and drift for every model on the same walks; (section, rollouts per
    model). Repeat-last's next chunk is the world's own baseline column."""
    nxt, drift, rolls = {}, {}, {}
    for name, model in models.items():
        if not isinstance(model, RepeatPredictor):
            n = next_chunk(model, episodes, sizes.starts, seed=0)
            nxt[name] = {**n, "psnr": bootstrap(n["next_chunk_psnr_per_episode"])}
            if name == "world":
                nxt["repeat"] = {"psnr": bootstrap(n["baseline_repeat_psnr_per_episode"])}
        rolls[name] = open_loop(model, episodes, sizes.horizon)
        d = drift_scores(rolls[name], episodes)
        drift[name] = {**d, "psnr": bootstrap(d["rollout_psnr_per_episode"]),
                       "mirrored_drop_db": bootstrap(d["mirrored_drop_per_episode"]),
                       "frames_per_s": rolls[name]["frames"] / rolls[name]["seconds"]}
    return {"next_chunk": nxt, "drift": drift}, rolls


def camera(rolls: dict, episodes, probes) -> dict:
    if probes is None:
        return {"skipped": "no probes given"}
    return {name: camera_scores(r, episodes, probes.motion) for name, r in rolls.items()}


def _run(run: SuiteRun) -> tuple[dict, dict]:
    f = run.world.chunk_frames
    eps = suite_walks(run.engine, run.sizes, run.world.size, f)
    section, rolls = psnr_section(run.models, eps, run.sizes)
    section["walks"] = {"count": len(eps), "frames": f + run.sizes.horizon + f,
                        "seeds": [ep.meta.get("seed") for ep in eps]}
    section["camera"] = camera(rolls, eps, run.probes)
    return section, {"main": strip(rolls, eps)}


def psnr_rows(section: dict, where: str, probes: dict | None = None) -> list[Row]:
    """Next chunk (with the world's ceiling and warp-last), open loop, mirrored controls
    and each control's camera following (a control the probe cannot read says so)."""
    world = section["next_chunk"].get("world", {})
    ceiling, warp = world.get("autoencoder_psnr"), world.get("baseline_warp_psnr")
    rows = [(where, "next-chunk PSNR (dB)",
             {m: v.get("psnr") for m, v in section["next_chunk"].items()}),
            (where, "next chunk: the world's autoencoder (ceiling) / warp-last (dB)",
             {"engine": f"{cell(ceiling)} / {cell(warp)}"}),
            (where, "open-loop PSNR, all steps (dB)",
             {m: v["psnr"] for m, v in section["drift"].items()}),
            (where, "mirrored controls: PSNR drop (dB)",
             {m: v["mirrored_drop_db"] for m, v in section["drift"].items()})]
    cam = section.get("camera", {})
    if "skipped" not in cam:
        for c in MOTION_FIELDS:
            scores = (probes or {}).get("motion", {}).get(c, {})
            if motion_usable(scores):
                rows.append((where, f"camera {c}: error / engine-frame error",
                             {m: v["controls"][c]["ratio"] for m, v in cam.items()}))
            else:
                rows.append((where, f"camera {c}: not scored (the probe's held-out error is "
                                    f"{cell(scores.get('mae_over_mean_motion'))} of the "
                                    f"mean-motion baseline's)", {}))
    return rows


def drift_figure(drift: dict, title: str):
    import plotly.graph_objects as go

    fig = go.Figure([go.Scatter(y=v["rollout_psnr"], name=m, mode="lines+markers")
                     for m, v in drift.items()])
    fig.update_layout(title=title, xaxis_title="rollout frame", yaxis_title="PSNR (dB)")
    return fig


def camera_figure(cam: dict, probes: dict | None):
    """Each scored control's error over the probe's error on engine frames, per model."""
    import plotly.graph_objects as go

    fig = go.Figure()
    motion = (probes or {}).get("motion", {})
    scored = [c for c in MOTION_FIELDS if motion_usable(motion.get(c, {}))]
    for m, v in cam.items():
        fig.add_bar(name=m, x=scored, y=[v["controls"][c]["ratio"] for c in scored])
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="engine frames")
    fig.update_layout(title="camera following: probe error / its error on engine frames "
                            "(1 = as good as the engine)", barmode="group")
    return fig


def _rows(result: dict) -> list[Row]:
    return psnr_rows(result, "held-out walks", result.get("probes"))


def _figures(result: dict) -> list:
    figs = [drift_figure(result["drift"], "open-loop PSNR per step, held-out walks")]
    if "skipped" not in result["camera"]:
        figs.append(camera_figure(result["camera"], result.get("probes")))
    return figs


PROTOCOL = Protocol("held_out", "next chunk, drift, camera",
                    ("next_chunk", "drift", "walks", "camera"), _run, _rows, _figures)
