"""`NotebookGame`: a thin ipywidgets shell around a `WorldSession`, and the `KEYMAP`.

    game = wl.play.NotebookGame(session)
    game.show()                      # display; click the image, keep the pointer on it, play
    game.run_script(actions, prompts)   # the session's steps without a keyboard
    with game.lock: session.save(path)  # a cell that uses the session while the game is live

One `ipywidgets.Image` is updated in place per frame (PNG bytes; never a new output per
frame). Keys come from `ipyevents` on that image, so the pointer must be over it. On-screen
buttons do the same for touchpads. Keys and buttons go through a `live.LiveLoop`: the
event callback only leaves the press in a slot of one (a press made while a chunk is being
generated replaces the one waiting: the latest intent wins), a worker thread makes the
chunk, and the chunk's frames are shown as motion, one per frame of game time. `show()`
starts the worker with one silent chunk (the warm-up), saying "loading" until it is done.
A status line says what the loop is doing (loading, making a chunk, ready); the stats line
says what the machine does now: the last chunk's time, the frames per second that makes,
and the last key-to-frame time as the kernel sees it (the browser adds its own delay), and
under it the session's notes (`WorldSession.status().notes`: chunks slower than the game, a
prompt the world was not trained on). Both lines carry their numbers as `data-` attributes
(`STATS_ATTRS`, `data-kind` on the status) for scripts such as
`scripts/browser_play_check.py`, so no script parses the wording. Each screen is labelled:
the model's frame, the engine twin's, the minimap.

The minimap is a plotly `FigureWidget` (it needs the `anywidget` package): the level's walls
(`WorldSession.level_area`: DOOM's map, the procedural world's rooms), axes in metres,
the top-down trajectory (x east, y north, equal aspect) and an arrow at the current position
pointing along the heading, plus a "3D cache" trace: the points of a memory world's 3D
cache (`WorldSession.memory_points`), which `show_cache_points` draws. The view follows the
trail (`map_view`: at least MAP_VIEW_M metres around it), since a walk of a few metres on
a whole level's map would be a few pixels long. It is redrawn in one
`batch_update` once per chunk (every `chunk_frames` steps) and at the end of a script, not
per frame, so it does not slow play down. Errors raised in callbacks land in an `Output`
widget instead of vanishing.

Shape legend: h w height/width, t positions, n cache points.
"""

from __future__ import annotations

import collections
import html
import threading

import numpy as np

from ..camera import Action, heading_from_pose
from ..model.textenc import check_prompt
from ..viz import to_png_bytes
from .live import LiveLoop
from .session import DEMO_PROMPT, WorldSession, check_action

MOVE_M, TURN_DEG, LOOK_DEG = 0.25, 10.0, 5.0  # per frame; a key press holds it for a chunk
KEYMAP: dict[str, Action] = {
    "w": Action(forward=MOVE_M), "s": Action(forward=-MOVE_M),
    "a": Action(right=-MOVE_M), "d": Action(right=MOVE_M),
    "ArrowLeft": Action(yaw=TURN_DEG), "ArrowRight": Action(yaw=-TURN_DEG),
    "ArrowUp": Action(pitch=LOOK_DEG), "ArrowDown": Action(pitch=-LOOK_DEG),
    " ": Action(buttons={"jump"}), "f": Action(buttons={"attack"}),
    "e": Action(buttons={"use"}),
}
PAD = (("w", "▲ forward"), ("s", "▼ back"), ("a", "◀ strafe"), ("d", "strafe ▶"),
           ("ArrowLeft", "⟲ turn"), ("ArrowRight", "turn ⟳"), ("ArrowUp", "look up"),
           ("ArrowDown", "look down"), (" ", "jump"), ("f", "attack"), ("e", "use"))
SCREEN_PX = 384  # frames are enlarged (nearest) to about this many pixels
MAP_PX, MAP_TRAIL = 240, 512  # minimap side in pixels; positions kept for the trail
MAP_VIEW_M = 12.0  # the minimap shows at least this many metres around the trail
SCREEN_LABELS = ("model: generated frames", "engine twin: ground truth", "map (metres)")
WALL_TRACE, CACHE_TRACE, TRAIL_TRACE, HERE_TRACE = 0, 1, 2, 3  # minimap traces, drawn in order
PAD_LAYOUT = {"grid_template_columns": "repeat(6, 95px)"}  # on-screen buttons, 2 rows
KEEP_SIZE = {"flex": "0 0 auto"}  # a narrow page wraps the screens instead of squeezing them
STATUS_COLOURS = {"loading": "#d08000", "busy": "#d08000", "ready": "#2a9d2a",
                  "error": "#d03030", "closed": "#888"}


def map_figure(area=None):
    """The minimap: a FigureWidget with the traces WALL_TRACE (the level's walls, from
    `area`, a `ReachableArea`, when the engine has one), CACHE_TRACE, TRAIL_TRACE and
    HERE_TRACE (an arrow marker; plotly turns it clockwise from north); axes in metres."""
    import plotly.graph_objects as go

    wx, wy = [], []
    if area is not None:  # segments joined by None gaps: one trace for every wall
        walls = np.concatenate([area.walls, np.full((len(area.walls), 1, 2), np.nan)], 1)
        wx, wy = ([None if np.isnan(v) else float(v) for v in col]
                  for col in walls.reshape(-1, 2).T)
    metres = {"showticklabels": True, "ticksuffix": " m", "tickfont": {"size": 9,
                                                                       "color": "#aaa"},
              "gridcolor": "#333", "zeroline": False}
    traces = [go.Scatter(x=wx, y=wy, mode="lines", name="walls", hoverinfo="skip",
                         line={"color": "#c8c8c8", "width": 1}),
              go.Scatter(x=[], y=[], mode="markers", name="3D cache", hoverinfo="skip",
                         marker={"size": 3, "color": "#888"}),
              go.Scatter(x=[], y=[], mode="lines+markers", name="trail",
                         line={"color": "#5aa0ff", "width": 3},
                         marker={"size": 4, "color": "#5aa0ff"}),
              go.Scatter(x=[], y=[], mode="markers", name="here",
                         marker={"symbol": "arrow", "size": 16, "color": "#ff5040"})]
    fig = go.FigureWidget(traces)
    fig.update_layout(width=MAP_PX, height=MAP_PX, margin={"l": 36, "r": 4, "t": 4, "b": 20},
                      showlegend=False, plot_bgcolor="#181818", paper_bgcolor="#181818",
                      xaxis=metres, yaxis={**metres, "scaleanchor": "x", "scaleratio": 1})
    return fig


def map_view(xy: np.ndarray, least_m: float = MAP_VIEW_M) -> tuple[list, list]:
    """x and y axis ranges (metres) of a square around the trail `xy` (t, 2): its bounding
    box plus 2 m, at least `least_m` on a side, so a short walk fills the map."""
    lo, hi = xy.min(0), xy.max(0)  # (2,)
    half = max(least_m, float((hi - lo).max()) + 2.0) / 2
    mid = (lo + hi) / 2
    return [mid[0] - half, mid[0] + half], [mid[1] - half, mid[1] + half]


def _screen(frame: np.ndarray) -> bytes:
    scale = max(1, SCREEN_PX // frame.shape[0])
    return to_png_bytes(frame.repeat(scale, axis=0).repeat(scale, axis=1))


# game-ms: the game time one chunk shows (chunk_frames / frame rate), what a chunk may take
STATS_ATTRS = ("step", "chunk-ms", "key-ms", "game-ms", "cache-chunks", "psnr", "event",
               "slow")


def stats_html(stats: dict, status, key_to_frame_ms: float | None = None) -> str:
    """The stats line as HTML: the wording for people, the numbers for scripts as data-
    attributes (STATS_ATTRS; "" where there is none), then one line per note of `status`
    (a `SessionStatus`)."""
    def num(v, fmt="{:.0f}"):
        return "" if v is None else fmt.format(v)
    attrs = {"step": str(stats["step"]), "chunk-ms": num(stats.get("chunk_latency_ms")),
             "key-ms": num(key_to_frame_ms),
             "game-ms": num(1e3 * status.chunk_frames / status.frame_rate),
             "cache-chunks": str(stats["cache_chunks"]),
             "psnr": num(stats.get("psnr"), "{:.2f}"), "event": stats.get("event") or "",
             "slow": "1" if status.slow else "0"}
    data = " ".join(f'data-{k}="{html.escape(attrs[k])}"' for k in STATS_ATTRS)
    line = html.escape(format_stats(stats, status.chunk_frames, key_to_frame_ms))
    rows = "".join(f"<div class='worldlab-note' style='color:#d08000'>&#9888; "
                   f"{html.escape(n)}</div>" for n in status.notes)
    return f"<code {data}>{line}</code>{rows}"


def format_stats(stats: dict, chunk_frames: int, key_to_frame_ms: float | None = None) -> str:
    """The stats line: the frame on screen, then what this machine does now (the last
    chunk's generation time and the frames per second that makes, the last key-to-frame
    time), the KV cache, memory, and the score against the engine twin."""
    parts = [f"frame {stats['step']}"]
    chunk_ms = stats.get("chunk_latency_ms")
    if chunk_ms:
        parts.append(f"making {1e3 * chunk_frames / chunk_ms:.1f} frames/s "
                     f"({chunk_ms:.0f} ms per {chunk_frames}-frame chunk)")
    if key_to_frame_ms is not None:
        parts.append(f"key to frame {key_to_frame_ms:.0f} ms")
    parts += [f"KV cache {stats['cache_chunks']} chunks", f"{stats['rss_mb']:.0f} MB"]
    if stats.get("psnr") is not None:
        parts.append(f"PSNR vs engine {stats['psnr']:.1f} dB")
    if stats.get("event"):
        parts.append(f"event: {stats['event']!r}")
    if stats.get("pending_prompt"):
        parts.append(f"next chunk: {stats['pending_prompt']!r}")
    return " | ".join(parts)


class NotebookGame:
    """Widgets around a started `WorldSession` (call `session.reset()` first)."""

    def __init__(self, session: WorldSession, examples: tuple[str, ...] = ()):
        import ipywidgets as W
        from ipyevents import Event

        if not isinstance(session, WorldSession) or not session.started:
            raise ValueError(f"NotebookGame needs a WorldSession after reset(), got "
                             f"{session!r}")
        self.session = session
        self.lock = threading.RLock()  # one user of the session at a time
        now = session.current()
        self.image = W.Image(format="png", value=_screen(now.frame), layout=KEEP_SIZE)
        self.twin = W.Image(format="png", value=_screen(now.twin_frame), layout=KEEP_SIZE) \
            if now.twin_frame is not None else None
        self.map = map_figure(session.level_area())
        self.status, self.stats = W.HTML(), W.HTML()
        self.status.add_class("worldlab-status")  # names for scripts/browser_play_check.py
        self.stats.add_class("worldlab-stats")
        self.errors = W.Output(layout={"border": "1px solid #ddd"})
        self.prompt = W.Combobox(placeholder="an event, e.g. summon a monster",
                                 options=list(examples or self._examples()),
                                 ensure_option=False, layout={"width": "320px"})
        send = W.Button(description="prompt at next chunk", layout={"width": "auto"})
        send.on_click(lambda _: self._guard(self._queue_prompt))
        pad = []
        for key, label in PAD:
            b = W.Button(description=label, layout={"width": "90px"})
            b.on_click(lambda _, k=key: self._guard(self.offer, k))
            pad.append(b)
        again = W.Button(description="restart", layout={"width": "90px"},
                         tooltip="start again from the engine's first chunk (e.g. after "
                                 "the engine's player died)")
        again.on_click(lambda _: self._guard(self.restart))
        self._events = Event(source=self.image, watched_events=["keydown"],
                             prevent_default_action=True)
        self._events.on_dom_event(lambda e: self._guard(self.offer, e.get("key", "")))
        self.live = LiveLoop(session, self._show, 1.0 / session.frame_rate(),
                             self._set_status, self._log_error, self.lock)
        self._trail = collections.deque(maxlen=MAP_TRAIL)  # (x, y) metres
        self._yaw = 0.0  # degrees, of the last pose shown
        self._key_ms: float | None = None  # the last key-to-frame time
        help_ = W.Label("Keep the pointer over the game image: WASD move, arrows turn/look, "
                        "space jump, F attack, E use; restart starts the level again.")
        # each screen under its label, in a box that keeps its size (the FigureWidget's own
        # .layout is plotly's, not a widget layout)
        shown = [self.image] + ([self.twin] if self.twin is not None else []) + [self.map]
        labels = SCREEN_LABELS if self.twin is not None else SCREEN_LABELS[::2]
        screens = [W.VBox([W.HTML(f"<b>{text}</b>"), view], layout=KEEP_SIZE)
                   for text, view in zip(labels, shown)]
        self.widget = W.VBox([help_, W.HBox(screens, layout={"flex_flow": "row wrap"}),
                              self.status, self.stats,
                              W.GridBox(pad + [again], layout=PAD_LAYOUT),
                              W.HBox([self.prompt, send]), self.errors])
        self._set_status("ready", "not started: show() warms the model up")
        self._show(now)
        self.draw_map()

    def _examples(self) -> tuple[str, ...]:
        """The prompts the world was trained on, or the demo prompt if it cannot tell."""
        return self.session.known_prompts() or (DEMO_PROMPT,)

    def show(self, warm_up: bool = True):
        """The widget, to display; starts the live loop (with one silent warm-up chunk)."""
        self.live.start(warm_up)
        return self.widget

    def close(self) -> None:
        """Stop the live loop's threads (the widgets stay on screen)."""
        self.live.close()

    def restart(self):
        """Start the session again from its engine's first chunk, same seed (the engine's
        episode may have ended: in DOOM a summoned imp kills the player). Returns step 0."""
        with self.lock:
            first = self.session.restart()
            self._trail.clear()
            self._show(first)
            self.draw_map()
        self._set_status("ready", "restarted from the engine's first chunk")
        return first

    # ---- keys: the live path (coalesced, paced) and the direct one -----------------------

    def offer(self, key: str) -> bool:
        """A key press from the browser or a button: hand it to the live loop and return at
        once (True if it replaced a press still waiting). Unknown keys are ignored."""
        action = self._action(key)
        if action is None:
            return False
        return self.live.offer(action, key)

    def press(self, key: str):
        """Play one key press now, on this thread, frames shown without pacing; returns the
        last StepResult (None for an unknown key). A press is `session.step_chunk`: with the
        "hold" policy it plays out the chunk its action opens (f frames, each shown), so
        every press counts, as a short hold of the key; with "buffer" it is one step."""
        action = self._action(key)
        if action is None:
            return None
        with self.lock:
            results = self.session.step_chunk(action, self.live.take_prompt())
            for result in results:
                self._show(result)
        return results[-1]

    @staticmethod
    def _action(key: str) -> Action | None:
        if not isinstance(key, str):
            raise ValueError(f"key must be a str, a key name such as 'w' or 'ArrowLeft' "
                             f"(see KEYMAP), got {type(key).__name__} {key!r}")
        return KEYMAP.get(key) or KEYMAP.get(key.lower())  # "W" with shift is "w"

    def apply(self, action, prompt: str | None = None):
        """One session step with `action` (and `prompt`, else the one queued in the box)."""
        action = check_action(action)
        with self.lock:
            queued = self.live.take_prompt()
            result = self.session.step(action, prompt if prompt is not None else queued)
            self._show(result)
        return result

    def run_script(self, actions, prompts=None) -> list:
        """Drive the game without a keyboard: actions (Action or dict) and optional prompts
        (a list aligned with actions, None where there is none). Returns the StepResults."""
        actions = list(actions)
        prompts = [None] * len(actions) if prompts is None else list(prompts)
        if len(prompts) != len(actions):
            raise ValueError(f"prompts must align with actions: {len(prompts)} prompts for "
                             f"{len(actions)} actions")
        with self.lock:
            results = [self.apply(a, p) for a, p in zip(actions, prompts)]
        self.draw_map()  # the last steps of a chunk are not on the map yet
        return results

    def _queue_prompt(self):
        text = check_prompt(self.prompt.value)
        self.live.prompt(text)
        note = self.session.prompt_note(text)
        self._set_status("ready", f"prompt {text!r} waits for the next chunk" +
                         (f" ({note})" if note else ""))

    def _guard(self, fn, *args):
        """Run a callback; a raised error is printed in the errors panel, not lost."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - a widget callback must not die silently
            self._log_error(e)
            return None

    def _log_error(self, e: Exception) -> None:
        self.errors.append_stdout(f"{type(e).__name__}: {e}\n")

    def _set_status(self, kind: str, text: str) -> None:
        merged = self.live.mailbox.dropped if hasattr(self, "live") else 0
        note = f" &middot; {merged} presses merged while busy" if merged else ""
        if kind == "error":
            note += " &middot; the restart button starts the level again"
        self.status.value = (f"<span data-kind='{kind}' data-merged='{merged}' style='color:"
                             f"{STATUS_COLOURS[kind]}'>&#9679;</span> "
                             f"<code>{html.escape(text)}</code>{note}")

    def _show(self, result, key_to_frame_ms: float | None = None) -> None:
        """Put a StepResult on screen: frame, twin, trail, stats (the map once per chunk)."""
        self.image.value = _screen(result.frame)
        if self.twin is not None and result.twin_frame is not None:
            self.twin.value = _screen(result.twin_frame)
        pos, self._yaw, _ = heading_from_pose(result.c2w)
        self._trail.append(pos[:2])
        self._key_ms = key_to_frame_ms if key_to_frame_ms is not None else self._key_ms
        self.stats.value = stats_html(result.stats, self.session.status(), self._key_ms)
        if result.step and result.step % self.session.chunk_frames == 0:  # once per chunk
            self.draw_map()

    # ---- minimap ------------------------------------------------------------------------

    def draw_map(self) -> None:
        """Push the trail and heading to the minimap: one message to the browser."""
        xy = np.array(self._trail)  # (t, 2) metres
        trail, here = self.map.data[TRAIL_TRACE], self.map.data[HERE_TRACE]
        with self.map.batch_update():
            trail.x, trail.y = xy[:, 0], xy[:, 1]
            here.x, here.y = xy[-1:, 0], xy[-1:, 1]
            here.marker.angle = 90.0 - self._yaw  # yaw: counter-clockwise from east
            self.map.layout.xaxis.range, self.map.layout.yaxis.range = map_view(xy)
        if self.session.has_point_cache:  # the memory's point cache
            self.show_cache_points(self.session.memory_points())

    def show_cache_points(self, points) -> None:
        """Draw memory-cache points (n, 3) in world metres top-down on the minimap (z is
        dropped), e.g. `PointCache.points`; an empty (0, 3) array clears them."""
        pts = np.asarray(points, dtype=np.float64)
        if pts.ndim != 2 or pts.shape[1] != 3 or not np.isfinite(pts).all():
            raise ValueError(f"cache points must be finite (n, 3) world metres, got "
                             f"{np.asarray(points).dtype} {np.asarray(points).shape}")
        cache = self.map.data[CACHE_TRACE]
        with self.map.batch_update():
            cache.x, cache.y = pts[:, 0], pts[:, 1]
