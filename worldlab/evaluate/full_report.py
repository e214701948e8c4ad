"""The full suite's report: one headline table (printed, and in a self-contained HTML page
with plotly figures that opens in a browser without a kernel or a network).

    rows = headline_rows(result)          # [(section, metric, {column: value or interval})]
    print_full(result)
    write_html(results, strips, "runs/eval/full.html")

An interval is the `intervals.bootstrap` dict {"mean", "lo", "hi", "n"}; columns are the
models ("world", "peer", "repeat") and "engine" where the engine's own frames have a score
(the probes read them too). The page holds, per world: the table, open-loop PSNR curves
(main walks and the held-out map), camera-following error per control, event hit and
false-alarm shares, the revisit and long-horizon curves, the probes' held-out accuracy and
frame strips (engine, then each model, at the rollout steps of `full.STRIP_STEPS`).
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

import numpy as np

from ..atomic import atomic_write_bytes, atomic_write_text
from .full import STRIP_STEPS
from ..train.probes import motion_usable
from ..viz import to_png_bytes
from .intervals import fmt

COLUMNS = ("world", "peer", "repeat", "engine")
CONTROLS = ("forward", "strafe", "yaw", "pitch")


def _ci(v) -> dict | None:
    return v if isinstance(v, dict) and "mean" in v else None


def _value(v, digits: int = 2) -> str:
    if _ci(v):
        return fmt(v, digits)
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def _psnr_rows(section: dict, where: str, probes: dict | None = None) -> list:
    world = section["next_chunk"].get("world", {})
    ceiling, warp = world.get("autoencoder_psnr"), world.get("baseline_warp_psnr")
    rows = [(where, "next-chunk PSNR (dB)",
             {m: v.get("psnr") for m, v in section["next_chunk"].items()}),
            (where, "next chunk: the world's autoencoder (ceiling) / warp-last (dB)",
             {"engine": f"{_value(ceiling)} / {_value(warp)}"}),
            (where, "open-loop PSNR, all steps (dB)",
             {m: v["psnr"] for m, v in section["drift"].items()}),
            (where, "mirrored controls: PSNR drop (dB)",
             {m: v["mirrored_drop_db"] for m, v in section["drift"].items()})]
    camera = section.get("camera", {})
    if "skipped" not in camera:
        for c in CONTROLS:
            scores = (probes or {}).get("motion", {}).get(c, {})
            if motion_usable(scores):
                rows.append((where, f"camera {c}: error / engine-frame error",
                             {m: v["controls"][c]["ratio"] for m, v in camera.items()}))
            else:
                rows.append((where, f"camera {c}: not scored (the probe's held-out error is "
                                    f"{_value(scores.get('mae_over_mean_motion'))} of the "
                                    f"mean-motion baseline's)", {}))
    return rows


def headline_rows(result: dict) -> list[tuple[str, str, dict]]:
    """(section, metric, {column: value}) rows of one world's full result."""
    rows = _psnr_rows(result, "held-out walks", result.get("probes"))
    ev = result.get("events", {})
    if "rows" in ev:
        r = ev["rows"]
        cols = {m: r[m] for m in r if m in COLUMNS}
        cols["engine"] = r["engine_probe"]
        rows += [("events", f"'{ev['kind']}' shown within {ev['window_frames']} frames of "
                            f"the prompt (share)",
                  {m: v["hit_share"] for m, v in cols.items()}),
                 ("events", "false alarms without a prompt (share)",
                  {m: v["false_alarm_share"] for m, v in cols.items()}),
                 ("events", "engine labels: shown / false alarm",
                  {"engine": f"{r['engine_labels']['hit_share']['mean']:.2f} / "
                             f"{r['engine_labels']['false_alarm_share']['mean']:.2f}"})]
    elif ev:
        rows.append(("events", "skipped", {"world": ev.get("skipped")}))
    rows.append(("runtime", "frames/s (world: streaming with its KV cache)",
                 {m: v.get("fps") for m, v in result["runtime"].items() if m != "repeat"}))
    if "skipped" in result["revisit"]:
        rows.append(("revisit", "skipped", {"world": result["revisit"]["skipped"]}))
    else:
        rv = result["revisit"]["variants"]["world"]
        refs = result["revisit"].get("references") or {}
        rows.append(("revisit", "return-frame PSNR (dB)",
                     {"world": _interval(rv["return_psnr"], rv.get("return_psnr_ci")),
                      "repeat": (refs.get("repeat") or {}).get("return_psnr")}))
    lh = result["long"]
    rows.append(("long horizon", f"PSNR, last 100 of {lh['frames']} frames (dB)",
                 {"world": lh["psnr_late"], "repeat": lh.get("psnr_repeat_late")}))
    gen = result["generalisation"]
    where = f"unseen map {','.join(gen['maps'])}" if gen.get("maps") else "unseen seeds"
    rows += _psnr_rows(gen, where, result.get("probes"))
    return rows


def _interval(mean, ci) -> dict | float:
    return {"mean": mean, "lo": ci[0], "hi": ci[1], "n": None} if ci else mean


def print_full(result: dict) -> None:
    """The headline table of one world's result, intervals in brackets."""
    rows = headline_rows(result)
    cols = [c for c in COLUMNS if any(c in r[2] for r in rows)]
    cells = [[s, m] + [_value(r.get(c)) for c in cols] for s, m, r in rows]
    head = ["section", "metric", *cols]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *cells)]
    for line in [head, *cells]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)))


# ----------------------------------------------------------------------------------------
# HTML
# ----------------------------------------------------------------------------------------


def strip_image(frames_by_row: dict, scale: int = 2) -> np.ndarray:
    """uint8 (rows h s, columns w s, 3): one row per entry (engine, then each model), its
    frames side by side, each pixel `scale` x `scale`."""
    rows = [np.concatenate(list(v), axis=1) for v in frames_by_row.values()]
    return np.concatenate(rows, axis=0).repeat(scale, 0).repeat(scale, 1)


def _base64_png(frames_by_row: dict) -> str:
    return base64.b64encode(to_png_bytes(strip_image(frames_by_row))).decode()


def save_strip(frames_by_row: dict, path) -> Path:
    """The strip as a PNG at `path`, atomically."""
    atomic_write_bytes(Path(path), to_png_bytes(strip_image(frames_by_row)))
    return Path(path)


def figures(result: dict) -> list:
    """The plotly figures of one world's result: PSNR curves, camera following, events,
    long horizon."""
    import plotly.graph_objects as go

    figs = []
    for key, title in (("drift", "open-loop PSNR per step, held-out walks"),
                       ("generalisation", "open-loop PSNR per step, unseen map / seeds")):
        d = result[key]["drift"] if key == "generalisation" else result["drift"]
        fig = go.Figure([go.Scatter(y=v["rollout_psnr"], name=m, mode="lines+markers")
                         for m, v in d.items()])
        fig.update_layout(title=title, xaxis_title="rollout frame", yaxis_title="PSNR (dB)")
        figs.append(fig)
    if "skipped" not in result["camera"]:
        fig = go.Figure()
        motion = (result.get("probes") or {}).get("motion", {})
        scored = [c for c in CONTROLS if motion_usable(motion.get(c, {}))]
        for m, v in result["camera"].items():
            fig.add_bar(name=m, x=scored, y=[v["controls"][c]["ratio"] for c in scored])
        fig.add_hline(y=1.0, line_dash="dot", annotation_text="engine frames")
        fig.update_layout(title="camera following: probe error / its error on engine frames "
                                "(1 = as good as the engine)", barmode="group")
        figs.append(fig)
    if "rows" in result["events"]:
        fig = go.Figure()
        for what in ("hit_share", "false_alarm_share"):
            names = list(result["events"]["rows"])
            ci = [result["events"]["rows"][m][what] for m in names]
            fig.add_bar(name=what.replace("_", " "), x=names, y=[c["mean"] for c in ci],
                        error_y={"type": "data", "symmetric": False,
                                 "array": [c["hi"] - c["mean"] for c in ci],
                                 "arrayminus": [c["mean"] - c["lo"] for c in ci]})
        fig.update_layout(title=f"events: '{result['events']['kind']}' after the prompt "
                                f"'{result['events']['prompt']}'", barmode="group")
        figs.append(fig)
    c = result["long"]["curves"]
    fig = go.Figure([go.Scatter(x=c["frame"], y=c[k], name=k.replace("psnr_", ""))
                     for k in ("psnr_open_loop", "psnr_drift_free", "psnr_autoencoder",
                               "psnr_repeat")])
    fig.update_layout(title="long horizon: PSNR along the walk", xaxis_title="frame",
                      yaxis_title="PSNR (dB)")
    figs.append(fig)
    return figs


def _table_html(result: dict) -> str:
    rows = headline_rows(result)
    cols = [c for c in COLUMNS if any(c in r[2] for r in rows)]
    head = "".join(f"<th>{c}</th>" for c in ["section", "metric", *cols])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in
                                    [s, m, *(_value(r.get(c)) for c in cols)]) + "</tr>"
                   for s, m, r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _probes_html(report: dict | None) -> str:
    if not report:
        return "<p>no probes</p>"
    kinds = "; ".join(f"{k}: balanced accuracy {v['balanced_accuracy']:.3f} "
                      f"({'used' if v['usable'] else 'not used'})"
                      for k, v in report["kinds"].items())
    motion = "; ".join(f"{k}: {v['mae']:.3g} (mean-motion baseline "
                       f"{v['mean_motion_mae']:.3g}, "
                       f"{'scored' if motion_usable(v) else 'not scored'})"
                       for k, v in report["motion"].items() if v["mae"] is not None)
    return (f"<p><b>kinds probe</b> (held-out engine frames, bar "
            f"{report['accuracy_bar']}): {html.escape(kinds)}</p><p><b>motion probe</b> "
            f"mean absolute error on held-out engine pairs {report['gap']} frames apart: "
            f"{html.escape(motion)}</p>")


def write_html(results: dict, strips: dict, path, title: str = "worldlab benchmark") -> Path:
    """One page for {world name: full result} with their {world name: strips}; plotly's
    script is inlined, so the file opens offline. Written atomically."""
    import plotly.io as pio

    parts, first = [], True
    for name, result in results.items():
        parts.append(f"<h2>{html.escape(name)} ({html.escape(result['engine'])})</h2>")
        parts.append(_table_html(result))
        parts.append(_probes_html(result.get("probes")))
        for fig in figures(result):
            parts.append(pio.to_html(fig, full_html=False,
                                     include_plotlyjs="inline" if first else False))
            first = False
        for where, s in strips.get(name, {}).items():
            parts.append(f"<p>frames {', '.join(map(str, STRIP_STEPS))} of the first "
                         f"{where} rollout; rows: {', '.join(s)}</p>"
                         f"<img src='data:image/png;base64,{_base64_png(s)}'>")
        parts.append(f"<p>seconds per section: {html.escape(str(result['seconds']))}</p>")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>body{{font-family:sans-serif;max-width:1100px;margin:auto}}"
            f"table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 6px;"
            f"font-size:13px}}</style></head><body><h1>{html.escape(title)}</h1>"
            + "".join(parts) + "</body></html>")
    path = Path(path)
    atomic_write_text(path, page)
    return path
