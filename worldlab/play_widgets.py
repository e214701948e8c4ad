"""`NotebookGame`: a thin ipywidgets shell around a `WorldSession`, and the `KEYMAP`.

    game = wl.play.NotebookGame(session)
    game.widget                      # display; click the image, keep the pointer on it, play
    game.run_script(actions, prompts)   # the same code path without a keyboard

One `ipywidgets.Image` is updated in place per frame (PNG bytes; never a new output per
frame). Keys come from `ipyevents` on that image, so the pointer must be over it. On-screen
buttons do the same for touchpads. The minimap is a small image drawn here (top-down
trajectory + heading): plotly's FigureWidget needs the `anywidget` package, which worldlab
does not depend on, and a raster is cheaper to refresh every frame anyway. Errors raised in
callbacks land in an `Output` widget instead of vanishing.

Shape legend: h w height/width, t positions.
"""

from __future__ import annotations

import collections
import math

import numpy as np

from .camera import Action, heading_from_pose
from .play import WorldSession, check_action
from .viz import to_png_bytes

MOVE_M, TURN_DEG, LOOK_DEG = 0.25, 10.0, 5.0  # one key press
KEYMAP: dict[str, Action] = {
    "w": Action(forward=MOVE_M), "s": Action(forward=-MOVE_M),
    "a": Action(right=-MOVE_M), "d": Action(right=MOVE_M),
    "ArrowLeft": Action(yaw=TURN_DEG), "ArrowRight": Action(yaw=-TURN_DEG),
    "ArrowUp": Action(pitch=LOOK_DEG), "ArrowDown": Action(pitch=-LOOK_DEG),
    " ": Action(buttons={"jump"}), "f": Action(buttons={"attack"}),
    "e": Action(buttons={"use"}),
}
BUTTONS = (("w", "▲ forward"), ("s", "▼ back"), ("a", "◀ strafe"), ("d", "strafe ▶"),
           ("ArrowLeft", "⟲ turn"), ("ArrowRight", "turn ⟳"), ("ArrowUp", "look up"),
           ("ArrowDown", "look down"), (" ", "jump"), ("f", "attack"), ("e", "use"))
SCREEN_PX = 384  # frames are enlarged (nearest) to about this many pixels
MAP_PX, MAP_TRAIL = 160, 512  # minimap side in pixels; positions kept for the trail
PAD_LAYOUT = {"grid_template_columns": "repeat(6, 95px)"}  # on-screen buttons, 2 rows


def minimap(positions: np.ndarray, yaw_deg: float, px: int = MAP_PX) -> np.ndarray:
    """Top-down image (px, px, 3) uint8 of a trail of positions (t, 2) in metres (x east,
    y north) and the heading at the last one; the view fits the trail plus 2 m."""
    img = np.full((px, px, 3), 24, np.uint8)
    lo, hi = positions.min(0) - 2.0, positions.max(0) + 2.0
    span = float(max(hi - lo))
    centre = (lo + hi) / 2

    def to_px(p):  # metres -> (row, col); north is up
        uv = (np.asarray(p) - centre) / span * (px - 1) + (px - 1) / 2
        return np.clip(np.round([px - 1 - uv[..., 1], uv[..., 0]]).astype(int), 0, px - 1)

    along = np.linspace(0, 1, 8)[None, :, None]  # draw the trail as joined segments
    trail = positions[:-1, None] + along * np.diff(positions, axis=0)[:, None]  # (t-1, 8, 2)
    r, c = to_px(np.concatenate([trail.reshape(-1, 2), positions[-1:]]))
    img[r, c] = (90, 160, 255)
    head = positions[-1] + 0.1 * span * np.array([math.cos(math.radians(yaw_deg)),
                                                  math.sin(math.radians(yaw_deg))])
    line = positions[-1] + np.linspace(0, 1, 24)[:, None] * (head - positions[-1])  # (24, 2)
    r, c = to_px(line)
    img[r, c] = (255, 200, 40)
    r, c = to_px(positions[-1])
    img[max(r - 2, 0):r + 3, max(c - 2, 0):c + 3] = (255, 80, 60)
    return img


def _screen(frame: np.ndarray) -> bytes:
    scale = max(1, SCREEN_PX // frame.shape[0])
    return to_png_bytes(frame.repeat(scale, axis=0).repeat(scale, axis=1))


def format_stats(stats: dict) -> str:
    parts = [f"step {stats['step']}", f"{stats['fps']:.1f} fps",
             f"chunk {stats.get('chunk_latency_ms', float('nan')):.0f} ms",
             f"cache {stats['cache_chunks']} chunks", f"{stats['rss_mb']:.0f} MB"]
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

        if not isinstance(session, WorldSession) or not getattr(session, "_started", False):
            raise ValueError(f"NotebookGame needs a WorldSession after reset(), got "
                             f"{session!r}")
        self.session = session
        self.image = W.Image(format="png", value=_screen(session.last_frame))
        self.twin = W.Image(format="png", value=_screen(session.last_twin)) \
            if session.last_twin is not None else None
        self.map = W.Image(format="png")
        self.stats = W.HTML()
        self.errors = W.Output(layout={"border": "1px solid #ddd"})
        self.prompt = W.Combobox(placeholder="an event, e.g. summon a monster",
                                 options=list(examples or self._examples()),
                                 ensure_option=False, layout={"width": "320px"})
        send = W.Button(description="prompt at next chunk")
        send.on_click(lambda _: self._guard(self._queue_prompt))
        pad = []
        for key, label in BUTTONS:
            b = W.Button(description=label, layout={"width": "90px"})
            b.on_click(lambda _, k=key: self._guard(self.press, k))
            pad.append(b)
        self._events = Event(source=self.image, watched_events=["keydown"],
                             prevent_default_action=True)
        self._events.on_dom_event(lambda e: self._guard(self.press, e.get("key", "")))
        self._trail = collections.deque(maxlen=MAP_TRAIL)  # (x, y) metres
        self._prompt: str | None = None
        help_ = W.Label("Keep the pointer over the game image: WASD move, arrows turn/look, "
                        "space jump, F attack, E use.")
        screens = [self.image] + ([self.twin] if self.twin is not None else []) + [self.map]
        self.widget = W.VBox([help_, W.HBox(screens), self.stats,
                              W.GridBox(pad, layout=PAD_LAYOUT),
                              W.HBox([self.prompt, send]), self.errors])
        self._show(session.last_frame, session.pose, session.last_twin, session.stats())

    def _examples(self) -> tuple[str, ...]:
        """One prompt per event of the engine (its first keyword), or the demo prompt."""
        from .play_cli import DEMO_PROMPT

        engine = self.session.engine
        return tuple(spec.keywords[0] for spec in engine.events) if engine is not None \
            else (DEMO_PROMPT,)

    # ---- the one code path for keys, buttons and scripts --------------------------------

    def press(self, key: str):
        """A key name (see KEYMAP); unknown keys are ignored, like a game does."""
        action = KEYMAP.get(key) or KEYMAP.get(key.lower())  # "W" with shift is "w"
        return None if action is None else self.apply(action)

    def apply(self, action, prompt: str | None = None):
        """One session step with `action` (and `prompt`, else the one queued in the box)."""
        action = check_action(action)
        prompt, self._prompt = (prompt if prompt is not None else self._prompt), None
        result = self.session.step(action, prompt)
        self._show(result.frame, result.c2w, result.twin_frame, result.stats)
        return result

    def run_script(self, actions, prompts=None) -> list:
        """Drive the game without a keyboard: actions (Action or dict) and optional prompts
        (a list aligned with actions, None where there is none). Returns the StepResults."""
        actions = list(actions)
        prompts = [None] * len(actions) if prompts is None else list(prompts)
        if len(prompts) != len(actions):
            raise ValueError(f"prompts must align with actions: {len(prompts)} prompts for "
                             f"{len(actions)} actions")
        return [self.apply(a, p) for a, p in zip(actions, prompts)]

    def _queue_prompt(self):
        from .textenc import check_prompt

        self._prompt = check_prompt(self.prompt.value)

    def _guard(self, fn, *args):
        """Run a callback; a raised error is printed in the errors panel, not lost."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - a widget callback must not die silently
            self.errors.append_stdout(f"{type(e).__name__}: {e}\n")
            return None

    def _show(self, frame, c2w, twin, stats) -> None:
        self.image.value = _screen(frame)
        if self.twin is not None and twin is not None:
            self.twin.value = _screen(twin)
        pos, yaw, _ = heading_from_pose(c2w)
        self._trail.append(pos[:2])
        self.map.value = to_png_bytes(minimap(np.array(self._trail), yaw))
        self.stats.value = f"<code>{format_stats(stats)}</code>"
