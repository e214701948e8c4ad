"""The full suite's report: one headline table (printed, and in a self-contained HTML page
with plotly figures that opens in a browser without a kernel or a network).

    rows = headline_rows(result)          # [(section, metric, {column: value or interval})]
    print_full(result)
    write_html(results, strips, "runs/eval/full.html")

An interval is the `stats.bootstrap` dict {"mean", "lo", "hi", "n"}; columns are the
models ("world", "peer", "repeat") and "engine" where the engine's own frames have a score
(the probes read them too). The rows and figures are each protocol's own
(`registry.PROTOCOLS`, those the result holds); the page adds, per world, the probes'
held-out accuracy, the frame strips (engine, then each model, at the rollout steps of
`suite.walks.STRIP_STEPS`) and the seconds per protocol.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

import numpy as np

from ..atomic import atomic_write_bytes, atomic_write_text
from ..train.probes import motion_usable
from ..viz import to_png_bytes
from . import registry
from .budget import budget_rows, summary
from .suite.base import COLUMNS, Row, cell
from .suite.walks import STRIP_STEPS


def headline_rows(result: dict, words: bool = True) -> list[Row]:
    """(section, metric, {column: value}) rows of one world's full result: each protocol's
    rows (`registry.present`), in the registry's order, then what each model cost to train
    (`budget.budget_rows`; with `words`, its budget in words too)."""
    rows = [row for p in registry.present(result) for row in p.rows(result)]
    if "budget" in result:  # results written before it recorded budgets have none
        rows += budget_rows(result["budget"], words)
    return rows


def print_full(result: dict) -> None:
    """The headline table of one world's result, intervals in brackets, then each model's
    training budget in words (too long for a column)."""
    rows = headline_rows(result, words=False)
    cols = [c for c in COLUMNS if any(c in r[2] for r in rows)]
    cells = [[s, m] + [cell(r.get(c)) for c in cols] for s, m, r in rows]
    head = ["section", "metric", *cols]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *cells)]
    for line in [head, *cells]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)))
    for column, budget in result.get("budget", {}).items():
        print(f"budget of {column}: {summary(budget)}")


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
    """The plotly figures of one world's result: each protocol's (`registry.present`)."""
    return [fig for p in registry.present(result) for fig in p.figures(result)]


def _table_html(result: dict) -> str:
    rows = headline_rows(result)
    cols = [c for c in COLUMNS if any(c in r[2] for r in rows)]
    head = "".join(f"<th>{c}</th>" for c in ["section", "metric", *cols])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in
                                    [s, m, *(cell(r.get(c)) for c in cols)]) + "</tr>"
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
        parts.append(f"<p>seconds per protocol: {html.escape(str(result['seconds']))}</p>")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>body{{font-family:sans-serif;max-width:1100px;margin:auto}}"
            f"table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 6px;"
            f"font-size:13px}}</style></head><body><h1>{html.escape(title)}</h1>"
            + "".join(parts) + "</body></html>")
    path = Path(path)
    atomic_write_text(path, page)
    return path
