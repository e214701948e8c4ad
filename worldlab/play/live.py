"""Live key handling for a shell: presses coalesce while a chunk is made, frames are paced.

    live = LiveLoop(session, show=lambda result, key_ms: ..., frame_s=1 / 8.75,
                    status=lambda kind, text: ...)
    live.start()                 # a worker thread: one silent chunk (warm-up), then keys
    live.offer(action, "w")      # from the event thread; returns at once
    live.close()

Why: the kernel hands key events to a callback one at a time. If the callback makes the
chunk itself, every press waits for all the chunks of the presses before it: four presses
100 ms apart finished 12, 24, 31 and 33 s later on a loaded laptop, and a held key piles up
a backlog that plays on long after the key is released. Here the callback only writes the
press into a `Mailbox` that holds one intent: a press made while a chunk is being generated
replaces the one waiting (the latest intent wins), so a burst or a held key costs at most
one chunk more than a single press.

Three parts, each usable alone:
- `Mailbox`: a slot of one; `put` replaces (and counts what it dropped), `take` blocks.
- `FramePlayer`: shows a chunk's frames as motion, one every `frame_s` seconds of game time
  (the chunk's own duration), on its own thread, so the next chunk is generated while this
  one plays; it holds at most one chunk besides the frame on screen.
- `LiveLoop`: the worker thread between them: warm-up, then take an intent, make its chunk
  with `session.step_chunk` under `lock` (a cell that uses the session while the game is
  live takes the same lock), hand the frames to the player.

No widgets here: the shell passes `show` (put one StepResult on screen) and `status`
(kind in STATUS_KINDS, a short text). Both run on the loop's threads.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field

STATUS_KINDS = ("loading", "busy", "ready", "error", "closed")


@dataclass
class Intent:
    """What the player asked for: an action (and the key that made it), when."""

    action: object  # camera.Action
    key: str = ""
    t: float = field(default_factory=time.perf_counter)  # when the press arrived


class Mailbox:
    """A slot for one item: `put` replaces what is waiting, `take` blocks until there is
    one (or the box is closed)."""

    def __init__(self):
        self._cv = threading.Condition()
        self._item = None
        self.closed = False
        self.received = self.dropped = 0  # puts; puts that replaced an item never taken

    def put(self, item) -> bool:
        """Leave `item` for the taker; True if it replaced one that was waiting."""
        if item is None:
            raise ValueError("Mailbox.put needs an item, got None (None means closed)")
        with self._cv:
            if self.closed:
                return False
            replaced = self._item is not None
            self._item = item
            self.received += 1
            self.dropped += replaced
            self._cv.notify_all()
            return replaced

    def take(self, timeout: float | None = None, on_take=None):
        """The waiting item (and empty the slot); None when closed or after `timeout` s.
        `on_take()` runs before the slot is seen empty, e.g. to mark the taker busy."""
        with self._cv:
            self._cv.wait_for(lambda: self._item is not None or self.closed, timeout)
            item, self._item = self._item, None
            if item is not None and not self.closed and on_take is not None:
                on_take()
            return None if self.closed else item

    def pending(self) -> bool:
        with self._cv:
            return self._item is not None

    def close(self) -> None:
        with self._cv:
            self.closed = True
            self._cv.notify_all()


class FramePlayer:
    """Shows frames one every `frame_s` seconds on its own thread.

    `play(items)` hands over one chunk: it waits while the previous chunk still has frames
    to show (so at most one chunk waits here), then returns; the first frame is shown as
    soon as the previous frame has been up for `frame_s`, the others `frame_s` apart.
    `show(item)` is called on the player's thread; an exception is passed to `on_error`.
    """

    def __init__(self, show, frame_s: float, on_error=None):
        if not (isinstance(frame_s, (int, float)) and 0 <= frame_s < 10):
            raise ValueError(f"frame_s must be seconds in [0, 10), got {frame_s!r}")
        self.show, self.frame_s, self.on_error = show, float(frame_s), on_error
        self._cv = threading.Condition()
        self._queue: collections.deque = collections.deque()
        self._showing = self._closed = False
        self._due = 0.0  # perf_counter time before which the next frame must not show
        self._thread = threading.Thread(target=self._run, name="worldlab-frames", daemon=True)
        self._thread.start()

    def play(self, items) -> None:
        with self._cv:
            self._cv.wait_for(lambda: not self._queue or self._closed)
            self._queue.extend(items)
            self._cv.notify_all()

    def idle(self) -> bool:
        with self._cv:
            return not self._queue and not self._showing

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: not self._queue and not self._showing, timeout)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._queue.clear()
            self._cv.notify_all()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._queue or self._closed)
                if self._closed:
                    return
                item, self._showing = self._queue.popleft(), True
                self._cv.notify_all()  # room for the next chunk once this one is drained
            time.sleep(max(0.0, self._due - time.perf_counter()))
            try:
                self.show(item)
            except Exception as e:  # noqa: BLE001 - a display error must not stop play
                if self.on_error is not None:
                    self.on_error(e)
            with self._cv:
                self._due = time.perf_counter() + self.frame_s
                self._showing = False
                self._cv.notify_all()


class LiveLoop:
    """The worker between a shell's key events and a `WorldSession` (see the module doc).

    show(result, key_to_frame_ms) puts one StepResult on screen; key_to_frame_ms is given
    on the first frame of a chunk (the time from the press, as the kernel saw it, to that
    frame being handed to the screen) and None on the others. status(kind, text) reports
    the loop's state: "loading" (warm-up), "busy" (making a chunk), "ready", "error",
    "closed". `prompt(text)` queues a prompt for the next chunk made.
    """

    def __init__(self, session, show, frame_s: float, status=None, on_error=None,
                 lock=None):
        self.session, self._show, self._status = session, show, status or (lambda k, t: None)
        self.on_error = on_error or (lambda e: None)
        self.lock = lock if lock is not None else threading.RLock()
        self.mailbox = Mailbox()
        self.frame_s = frame_s
        self.player: FramePlayer | None = None  # its thread starts with the loop
        self._prompt: str | None = None
        self._thread: threading.Thread | None = None
        self._busy = threading.Event()  # set while warming up or making a chunk
        self.chunks = 0  # chunks made by the loop
        self.warm_up_s: float | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self, warm_up: bool = True) -> None:
        """Start the worker (once); with `warm_up` it first makes one silent chunk."""
        if self._thread is None:
            self.player = FramePlayer(self._show_item, self.frame_s, self._error)
            self._thread = threading.Thread(target=self._run, args=(warm_up,), daemon=True,
                                            name="worldlab-live")
            self._thread.start()

    def offer(self, action, key: str = "") -> bool:
        """A press: starts the loop if needed; True if it replaced a press still waiting."""
        self.start()
        return self.mailbox.put(Intent(action, key))

    def prompt(self, text: str | None) -> None:
        """The event prompt for the next chunk made (replaces one not yet used)."""
        self._prompt = text

    @property
    def queued_prompt(self) -> str | None:
        return self._prompt

    def take_prompt(self) -> str | None:
        """The queued prompt, now used (by the worker, or a shell's own synchronous step)."""
        prompt, self._prompt = self._prompt, None
        return prompt

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no press is waiting, no chunk is being made and every frame is shown."""
        deadline = None if timeout is None else time.perf_counter() + timeout
        while self.mailbox.pending() or self._busy.is_set() or \
                (self.player is not None and not self.player.idle()):
            if deadline is not None and time.perf_counter() > deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self) -> None:
        self.mailbox.close()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.player is not None:
            self.player.close()
        self._status("closed", "closed")

    # ---- the worker ---------------------------------------------------------------------

    def _run(self, warm_up: bool) -> None:
        if warm_up:
            self._busy.set()
            self._status("loading", "loading: making one silent chunk so the first key "
                                    "press does not pay for start-up")
            try:
                with self.lock:
                    self.warm_up_s = self.session.warm_up()
                self._status("ready", f"ready (the warm-up chunk took {self.warm_up_s:.1f} s)")
            except Exception as e:  # noqa: BLE001 - reported, and play still works
                self._error(e)
            self._busy.clear()
        else:
            self._status("ready", "ready")
        while True:
            intent = self.mailbox.take(on_take=self._busy.set)  # never idle in between
            if intent is None:
                return
            self._status("busy", f"making a chunk for {intent.key or 'a press'!r}")
            try:
                with self.lock:
                    results = self.session.step_chunk(intent.action, self.take_prompt())
                self.chunks += 1
                self.player.play([(r, intent.t if i == 0 else None)
                                  for i, r in enumerate(results)])
            except Exception as e:  # noqa: BLE001 - the loop must survive a bad chunk
                self._error(e)  # the status keeps saying so until a chunk succeeds
                continue
            finally:
                self._busy.clear()
            if not self.mailbox.pending():
                self._status("ready", "ready")

    def _show_item(self, item) -> None:
        result, t_press = item
        self._show(result, None if t_press is None else 1e3 * (time.perf_counter() - t_press))

    def _error(self, e: Exception) -> None:
        self._status("error", f"{type(e).__name__}: {e}")
        self.on_error(e)
