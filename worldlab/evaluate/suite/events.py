"""Events: prompted characters, hits and false alarms (`evaluate.events`), for every model,
beside the engine's frames through the same probe and the engine's exact labels. Needs the
kinds probe: without probes the section says "skipped".

Section: events (`events.event_scores`' result) or {"skipped": why}.
"""

from __future__ import annotations

from ..events import SEED_OFFSET, event_scores, event_walks
from .base import COLUMNS, Protocol, Row, SuiteRun


def _run(run: SuiteRun) -> tuple[dict, dict]:
    if run.probes is None:
        return {"events": {"skipped": "no probes given"}}, {}
    walks = event_walks(run.engine, run.sizes.event_walks, run.world.size,
                        run.world.chunk_frames, seed=run.sizes.seed + SEED_OFFSET)
    return {"events": event_scores(run.models, walks, run.probes)}, {}


def _rows(result: dict) -> list[Row]:
    ev = result.get("events", {})
    if "rows" not in ev:
        return [("events", "skipped", {"world": ev.get("skipped")})] if ev else []
    r = ev["rows"]
    cols = {m: r[m] for m in r if m in COLUMNS}
    cols["engine"] = r["engine_probe"]
    labels = r["engine_labels"]
    return [("events", f"'{ev['kind']}' shown within {ev['window_frames']} frames of the "
                       f"prompt (share)", {m: v["hit_share"] for m, v in cols.items()}),
            ("events", "false alarms without a prompt (share)",
             {m: v["false_alarm_share"] for m, v in cols.items()}),
            ("events", "engine labels: shown / false alarm",
             {"engine": f"{labels['hit_share']['mean']:.2f} / "
                        f"{labels['false_alarm_share']['mean']:.2f}"})]


def _figures(result: dict) -> list:
    """Hit and false-alarm shares per model with their intervals."""
    import plotly.graph_objects as go

    ev = result["events"]
    if "rows" not in ev:
        return []
    fig = go.Figure()
    for what in ("hit_share", "false_alarm_share"):
        names = list(ev["rows"])
        ci = [ev["rows"][m][what] for m in names]
        fig.add_bar(name=what.replace("_", " "), x=names, y=[c["mean"] for c in ci],
                    error_y={"type": "data", "symmetric": False,
                             "array": [c["hi"] - c["mean"] for c in ci],
                             "arrayminus": [c["mean"] - c["lo"] for c in ci]})
    fig.update_layout(title=f"events: '{ev['kind']}' after the prompt '{ev['prompt']}'",
                      barmode="group")
    return [fig]


PROTOCOL = Protocol("events", "events", ("events",), _run, _rows, _figures)
