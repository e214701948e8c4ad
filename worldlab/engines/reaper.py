"""Child processes that end when their owner ends, however it ends.

Some engines run their game in a child process (ViZDoom starts its `vizdoom` binary in
`DoomGame.init()`). An owner that closes the game, or lets Python close it at garbage
collection or interpreter exit, ends the child; an owner that is killed (SIGKILL, SIGTERM,
a notebook kernel killed by Jupyter, a pool worker that exits with `os._exit`) runs no
Python at all, and ViZDoom ignores SIGTERM and outlives it, reparented to init.

So every owner process that starts such a child gets one watchdog: a small Python process
(this file run as a script) reading a pipe whose only writer is the owner. The kernel
closes the owner's end when the owner dies, however it dies; the watchdog then reads EOF,
SIGKILLs the children it was told about that are still alive (the same process: pid and
start time match), deletes the files they leave behind, and exits. A pipe ties the watchdog
to the owner *process*; `prctl(PR_SET_PDEATHSIG)` would tie it to the thread that started
it, which in a thread pool ends long before the owner does. Forked children (multiprocessing
workers) close their copy of the pipe at fork, so their life never delays the EOF, and get
their own watchdog if they start a child themselves.

    procs = start_guarded(game.init, "vizdoom")   # the new `vizdoom` children, guarded
    ...
    release(procs)                                 # after a clean close

Where a watchdog cannot start or a child is not found, a RuntimeWarning says that the
child may outlive a killed owner; nothing fails. Standard library + psutil only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence

import psutil

# a tick of the clock that process start times are counted in (1/100 s on Linux)
_START_TIME_TOLERANCE = 0.01
MARKER_VARIABLE = "WORLDLAB_GUARD"  # in the environment of children being started

_lock = threading.RLock()  # one engine start at a time, and whole lines on the pipe
_watchdog: subprocess.Popen | None = None
_warned = False


def start_guarded(start: Callable[[], object], name: str,
                  leftovers: Callable[[psutil.Process], Sequence[str]] = lambda p: ()
                  ) -> list[psutil.Process]:
    """Call `start()`, which launches child processes, and guard its new children called
    `name`: they are killed (and the files `leftovers(child)` deleted) when this process
    dies without `release`-ing them. Returns those children."""
    with _lock:  # two threads starting at once would each see the other's child as new
        # the watchdog first, so that it is not mistaken for a child of start()
        watchdog = _ensure_watchdog()
        me = psutil.Process()
        before = {p.pid for p in me.children()}
        # killed inside start(), this process has not named its new children yet: they carry
        # a marker in their environment, which the watchdog looks for until told they are
        # named (an owner killed while a game starts must not leave the game behind)
        marker = f"{os.getpid()}-{os.urandom(8).hex()}"
        _send(watchdog, ["?", name, marker])
        saved = os.environ.get(MARKER_VARIABLE)
        os.environ[MARKER_VARIABLE] = marker
        try:
            start()
        finally:
            if saved is None:
                del os.environ[MARKER_VARIABLE]
            else:
                os.environ[MARKER_VARIABLE] = saved
        new = [p for p in me.children() if p.pid not in before and _name(p) == name]
    if not new:
        _warn(f"no new child process named {name!r} appeared while starting it; it will "
              f"outlive this process if this process is killed")
    for proc in new:
        try:
            _send(watchdog, ["+", proc.pid, proc.create_time(), list(leftovers(proc))])
        except psutil.NoSuchProcess:  # it already ended: nothing to guard
            pass
    _send(watchdog, ["!", marker])  # named: the marker search is no longer needed
    return new


def release(procs: Iterable[psutil.Process]) -> None:
    """Stop guarding `procs` (they were closed cleanly; their pids may be reused)."""
    for proc in procs:
        _send(_watchdog, ["-", proc.pid])


def _name(proc: psutil.Process) -> str | None:
    try:
        return proc.name()
    except psutil.Error:  # it ended in between: not ours to guard
        return None


def _ensure_watchdog() -> subprocess.Popen | None:
    global _watchdog
    if _watchdog is not None and _watchdog.poll() is not None:
        _warn(f"the watchdog (pid {_watchdog.pid}) exited with code {_watchdog.returncode}; "
              f"the child processes it guarded will outlive this process if it is killed")
        _watchdog = None
    if _watchdog is None:
        try:
            # -I: run this file alone, without worldlab's folder on sys.path; a new session:
            # Ctrl-C and Jupyter's interrupts signal the owner's process group, and the
            # watchdog must live exactly as long as the owner, not die of its signals.
            # bufsize=0: an unbuffered pipe, so a fork never copies half-written lines.
            _watchdog = subprocess.Popen([sys.executable, "-I", __file__],
                                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         bufsize=0, start_new_session=True)
        except OSError as e:
            _warn(f"cannot start the watchdog {sys.executable!r} {__file__!r} ({e}); child "
                  f"processes will outlive this process if this process is killed")
            _watchdog = None
    return _watchdog


def _send(watchdog: subprocess.Popen | None, message: list) -> None:
    if watchdog is None:
        return
    with _lock:
        try:
            watchdog.stdin.write((json.dumps(message) + "\n").encode())
        except (OSError, ValueError) as e:  # the watchdog died, or its pipe was closed
            _warn(f"the watchdog (pid {watchdog.pid}) is gone ({e!r}); child processes "
                  f"will outlive this process if this process is killed")


def _warn(message: str) -> None:
    global _warned
    if not _warned:  # once per process: the same cause repeats for every engine
        _warned = True
        warnings.warn(message, RuntimeWarning, stacklevel=2)


def _after_fork_in_child() -> None:
    """A forked child shares none of its parent's guard: close the parent's pipe (else the
    parent's watchdog waits for this child too) and start afresh."""
    global _lock, _watchdog
    _lock = threading.RLock()  # another thread may have held it at the fork
    if _watchdog is not None:
        _watchdog.stdin.close()  # unbuffered: closes the descriptor, writes nothing
        _watchdog.returncode = 0  # not our child: never wait for it, never warn about it
    _watchdog = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ----------------------------------------------------------------------------------------
# The watchdog process
# ----------------------------------------------------------------------------------------


def _watch(lines) -> None:
    """Follow "+"/"-" (a child named, released) and "?"/"!" (children starting with a
    marker, named) messages until EOF (the owner died), then kill what is left."""
    guarded: dict[int, tuple[float, list[str]]] = {}
    starting: dict[str, str] = {}  # marker -> process name
    for line in lines:
        message = json.loads(line)
        if message[0] == "+":
            guarded[message[1]] = (message[2], message[3])
        elif message[0] == "-":
            guarded.pop(message[1], None)
        elif message[0] == "?":
            starting[message[2]] = message[1]
        else:
            starting.pop(message[1], None)
    for marker, name in starting.items():  # the owner died while these were starting
        for proc in psutil.process_iter(["name"]):
            try:
                if (proc.info["name"] == name
                        and proc.environ().get(MARKER_VARIABLE) == marker):
                    proc.kill()
            except psutil.Error:  # gone, or not ours to read
                pass
    for pid, (started, files) in guarded.items():
        try:
            proc = psutil.Process(pid)
            if abs(proc.create_time() - started) < _START_TIME_TOLERANCE:
                proc.kill()
        except psutil.Error:  # already gone (or its pid reused by a stranger: leave it)
            pass
        for path in files:  # unlinking is safe while the dying child still maps them
            try:
                os.remove(path)
            except FileNotFoundError:
                pass


if __name__ == "__main__":
    # live exactly as long as the owner: a tree-wide SIGTERM or Ctrl-C that the owner
    # survives must not end its guard, and one that kills the owner is handled at EOF
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch(sys.stdin.buffer)
