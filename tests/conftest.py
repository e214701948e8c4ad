"""Suite-wide guards: no ViZDoom process that the session started outlives the session.

ViZDoom runs its game in a `vizdoom` child process that ignores SIGTERM and outlived its
owners before `worldlab.engines.reaper`. Every process the session starts inherits a tag in
its environment, `vizdoom` included, so the check finds the session's own games even after
their owners died and they were reparented to init, and never another session's.
"""

import gc
import os
import time
import uuid

import psutil
import pytest

TAG = "WORLDLAB_TEST_SESSION"
# set at import, before any test module is collected: every process started after this
# point carries it
os.environ[TAG] = uuid.uuid4().hex
GRACE_S = 5.0  # the last owners may still be ending


def _strays() -> list[psutil.Process]:
    """This session's live `vizdoom` processes, except the ones this process still owns
    (their engines close when it exits)."""
    found = []
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] != "vizdoom":
            continue
        try:
            if (proc.environ().get(TAG) == os.environ[TAG] and proc.ppid() != os.getpid()
                    and proc.status() != psutil.STATUS_ZOMBIE):
                found.append(proc)
        except psutil.Error:  # ended meanwhile, or another user's
            pass
    return found


@pytest.fixture(scope="session", autouse=True)
def no_vizdoom_outlives_the_session():
    yield
    gc.collect()  # engines that only garbage still holds close now
    deadline = time.monotonic() + GRACE_S
    while (strays := _strays()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for proc in strays:  # report them, but leave none behind
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    if strays:
        pytest.fail(f"{len(strays)} vizdoom process(es) started by this test session "
                    f"outlived their owners: pids {[p.pid for p in strays]}; they were "
                    f"killed now (see worldlab/engines/reaper.py)", pytrace=False)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors: one thread avoids oversubscribing a shared 2-core machine. A module
    opts in with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory):
    """An untrained tiny world on disk (`test_play.make_tiny_world`), one per module; a
    module with other needs defines its own."""
    from test_play import make_tiny_world

    return make_tiny_world(tmp_path_factory.mktemp("tiny_world"))


@pytest.fixture(scope="module")
def world(world_dir):
    """That world loaded on the CPU, shared by the module's tests (its text cache too)."""
    from worldlab.pretrained import load_world

    return load_world(world_dir, device="cpu")
