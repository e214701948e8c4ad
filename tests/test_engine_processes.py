"""Every ViZDoom process ends when its owner ends, however the owner ends.

Each test starts an owner (a Python subprocess, a notebook run by papermill, a Jupyter
kernel) that opens a `DoomEngine(size=32)`, never closes it, reports the pids of its
`vizdoom` children, and then ends: by running off its end, by an exception, by Ctrl-C, by
SIGTERM, by SIGKILL, by a kernel shutdown, by a killed kernel. Within a few seconds none of
those pids may be alive (a zombie is dead: init in a container need not reap it). A test
that finds one kills it, so a failure never leaks a process itself.
"""

import json
import os
import signal
import subprocess
import sys
import time

import nbformat
import papermill
import psutil
import pytest
from jupyter_client import KernelManager

from worldlab.engines import reaper
from worldlab.engines.doom import DoomEngine

KERNEL = "worldlab"

# The owner holds its engine from a thread still running at exit, so the interpreter never
# frees it and ViZDoom's own destructor never runs (as in a notebook kernel, whose
# namespace is never freed either); only an exit hook or a watchdog ends the game then.
OWNER = """
import signal, sys, threading, time
import psutil
from worldlab.engines.doom import DoomEngine

# Ctrl-C as in a terminal: a shell that starts jobs in the background without job control
# makes them ignore SIGINT, and Python then installs no KeyboardInterrupt handler
signal.signal(signal.SIGINT, signal.default_int_handler)

engine = DoomEngine(size=32)
threading.Thread(target=lambda held=engine: time.sleep(600), daemon=True).start()
print(*[p.pid for p in psutil.Process().children() if p.name() == "vizdoom"], flush=True)
if sys.argv[1] == "raise":
    raise RuntimeError("the owner fails")
if sys.argv[1] == "wait":
    time.sleep(60)  # until the test signals it
"""

# the same, as a notebook cell, printing the kernel's pid first
CELL = """
import os, psutil
from worldlab.engines.doom import DoomEngine
engine = DoomEngine(size=32)
print(os.getpid(), *[p.pid for p in psutil.Process().children() if p.name() == "vizdoom"])
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_ended(pids: list[int], timeout: float = 10.0) -> None:
    """All `pids` end within `timeout` seconds; any left are killed, then reported."""
    assert pids, "the owner reported no vizdoom process"
    deadline = time.monotonic() + timeout
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in pids if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"vizdoom process(es) {left} outlived their owner by {timeout} s"


def _vizdoom_pids(text: str) -> list[int]:
    return [int(word) for word in text.split()]


# ----------------------------------------------------------------------------------------
# A Python process that owns an engine
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("end", ["exit", "raise", signal.SIGINT, signal.SIGTERM,
                                 signal.SIGKILL],
                         ids=["exit", "raise", "sigint", "sigterm", "sigkill"])
def test_owner_process_takes_vizdoom_with_it(end, tmp_path):
    mode = end if isinstance(end, str) else "wait"
    log = tmp_path / "owner.log"
    with open(log, "w") as err:
        # cwd: ViZDoom writes _vizdoom.ini into the working directory
        owner = subprocess.Popen([sys.executable, "-c", OWNER, mode], cwd=tmp_path,
                                 stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        # one line only: on failure the surviving vizdoom keeps the pipe open forever
        pids = _vizdoom_pids(owner.stdout.readline())
        if not isinstance(end, str):
            owner.send_signal(end)
        owner.wait(timeout=60)
    finally:
        owner.kill()
        owner.stdout.close()
    assert pids, f"the owner started no vizdoom: {log.read_text()[-2000:]}"
    assert_ended(pids)


# ----------------------------------------------------------------------------------------
# A notebook kernel that owns an engine
# ----------------------------------------------------------------------------------------


def test_papermill_notebook_takes_vizdoom_with_it(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": KERNEL,
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [nbformat.v4.new_code_cell(CELL)]
    nbformat.write(nb, tmp_path / "owner.ipynb")
    done = papermill.execute_notebook(tmp_path / "owner.ipynb", tmp_path / "out.ipynb",
                                      kernel_name=KERNEL, progress_bar=False, cwd=tmp_path)
    text = "".join(o.get("text", "") for o in done.cells[0].outputs)
    _kernel, *pids = _vizdoom_pids(text)
    assert_ended(pids)


def test_killed_kernel_takes_vizdoom_with_it(tmp_path):
    km = KernelManager(kernel_name=KERNEL)
    km.start_kernel(cwd=str(tmp_path))
    client = km.client()
    try:
        client.start_channels()
        client.wait_for_ready(timeout=60)
        out = []

        def keep(msg):
            out.append(msg["content"].get("text", msg["content"].get("evalue", "")))

        reply = client.execute_interactive(CELL, output_hook=keep, timeout=60)
        assert reply["content"]["status"] == "ok", out
        kernel, *pids = _vizdoom_pids("".join(out))
        assert kernel == km.provisioner.pid
        os.kill(kernel, signal.SIGKILL)
        assert_ended(pids)
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


# ----------------------------------------------------------------------------------------
# In this process: closing, and the watchdog's own rules
# ----------------------------------------------------------------------------------------


def _own_vizdoom() -> set[int]:
    return {p.pid for p in psutil.Process().children() if p.name() == "vizdoom"}


def test_close_is_idempotent_context_managed_and_runs_at_garbage_collection():
    before = _own_vizdoom()
    with DoomEngine(size=32) as engine:
        pids = list(_own_vizdoom() - before)
        engine.reset()
    assert_ended(pids, timeout=2.0)
    engine.close()  # again: nothing happens
    engine = DoomEngine(size=32)
    pids = list(_own_vizdoom() - before)
    del engine  # never closed: garbage collection closes it
    assert_ended(pids, timeout=2.0)


def test_no_watchdog_warns_and_the_engine_still_works(monkeypatch):
    monkeypatch.setattr(reaper, "_watchdog", None)
    monkeypatch.setattr(reaper, "_warned", False)
    monkeypatch.setattr(reaper.sys, "executable", "/nonexistent/python")
    with pytest.warns(RuntimeWarning, match="cannot start the watchdog.*/nonexistent/python"):
        engine = DoomEngine(size=32)
    with engine:
        assert engine.reset().rgb.shape == (32, 32, 3)


def test_watchdog_kills_only_what_it_still_guards(tmp_path):
    sleepers = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
    try:
        guarded, released, stranger = (psutil.Process(p.pid) for p in sleepers)
        leftover = tmp_path / "shm"
        leftover.write_text("")
        reaper._watch([
            json.dumps(["+", guarded.pid, guarded.create_time(), [str(leftover)]]),
            json.dumps(["+", released.pid, released.create_time(), []]),
            json.dumps(["-", released.pid]),
            # the pid of a process that ended, reused by another: started at another time
            json.dumps(["+", stranger.pid, stranger.create_time() - 5.0, []]),
        ])
        assert sleepers[0].wait(timeout=5) == -signal.SIGKILL and not leftover.exists()
        assert sleepers[1].poll() is None and sleepers[2].poll() is None
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


def test_watchdog_kills_children_still_starting_by_their_marker():
    """An owner killed inside start() has not named its new child yet: the child carries
    the start's marker in its environment, and the watchdog finds it by that."""
    marker, done_marker = "1-feedface", "1-named"
    env = {**os.environ, reaper.MARKER_VARIABLE: marker}
    starting = subprocess.Popen(["sleep", "60"], env=env)
    named = subprocess.Popen(["sleep", "60"], env={**os.environ,
                                                    reaper.MARKER_VARIABLE: done_marker})
    unmarked = subprocess.Popen(["sleep", "60"])
    try:
        reaper._watch([json.dumps(["?", "sleep", marker]), json.dumps(["?", "sleep", done_marker]),
                       json.dumps(["!", done_marker])])
        assert starting.wait(timeout=5) == -signal.SIGKILL
        assert named.poll() is None and unmarked.poll() is None
    finally:
        for p in (starting, named, unmarked):
            p.kill()
            p.wait()


def test_owner_killed_while_its_child_starts_takes_the_child_with_it(tmp_path):
    """The whole path: an owner SIGKILLs itself inside start(), after the child began."""
    pid_file = tmp_path / "child.pid"
    code = (
        "import os, signal, subprocess\n"
        "from worldlab.engines import reaper\n"
        "def start():\n"
        "    child = subprocess.Popen(['sleep', '60'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "reaper.start_guarded(start, 'sleep')\n")
    owner = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert owner.returncode == -signal.SIGKILL
    assert_ended([int(pid_file.read_text())])
