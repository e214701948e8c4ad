"""JupyterLab for scripts/browser_play_check.py: a copy of the notebook in a temporary
folder, a server on a free port in its own process group (so its kernel stops with it), and
the few things the page's JupyterLab is asked (kernel ready, every cell run, dialogs); and
the Chromium flags both browser checks launch with. Not part of the package; `make test`
runs the checks through ci/browser_checks.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


# headless Debian Chromium as root in a container, offline and quiet: no sandbox (root), no
# GPU, nothing fetched in the background; Playwright adds a fresh --user-data-dir itself
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]


def notebook_copy(notebook: Path, folder: Path, checkpoint: str) -> Path:
    """The notebook with interactive = True and the checkpoint, in `folder` (the committed
    notebook has no outputs, so neither has the copy)."""
    nb = json.loads(notebook.read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    lines = "".join(cell["source"]).splitlines()
    values = {"interactive": "True", "checkpoint": json.dumps(checkpoint)}
    for i, line in enumerate(lines):
        name = line.split("=")[0].strip()
        if name in values:
            comment = line[line.index("#"):] if "#" in line else ""
            lines[i] = f"{name} = {values[name]}  {comment}".rstrip()
    cell["source"] = "\n".join(lines)
    path = folder / notebook.name
    path.write_text(json.dumps(nb, indent=1))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(folder: Path, port: int, token: str, log: Path) -> subprocess.Popen:
    """JupyterLab serving `folder`; its own process group so the kernel stops with it."""
    cmd = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser",
           "--ip=127.0.0.1", f"--port={port}", f"--ServerApp.token={token}",
           f"--ServerApp.root_dir={folder}", "--LabApp.expose_app_in_browser=True",
           "--ServerApp.open_browser=False"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")  # Jupyter refuses to run as root unless told
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=folder)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {proc.returncode}; see {log}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.5)
    stop_lab(proc)
    raise RuntimeError(f"JupyterLab did not listen on port {port} within 60 s; see {log}")


def stop_lab(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (server + kernel), SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def dismiss_build_dialogs(page) -> int:
    """Cancel "Build Recommended" (an installed lab extension that is not built in, e.g.
    dash's): the modal covers the page, so the pointer could not reach the game image."""
    buttons = page.locator(".jp-Dialog", has_text="Build Recommended") \
        .locator(".jp-mod-reject").all()
    for b in buttons:
        b.click()
    return len(buttons)


def open_dialogs(page) -> list[str]:
    return [t.strip() for t in page.locator(".jp-Dialog-header").all_inner_texts()]



KERNEL_READY_JS = """async () => {
  const nb = window.jupyterapp.shell.currentWidget;
  await nb.context.ready;
  await nb.sessionContext.ready;
  const kernel = nb.sessionContext.session.kernel;
  while (kernel.status !== 'idle') await new Promise(r => setTimeout(r, 200));
  return kernel.name;
}"""


ALL_RUN_JS = """() => {
  const nb = window.jupyterapp.shell.currentWidget;
  const code = nb.content.widgets.filter(c => c.model.type === 'code');
  const running = [...nb.node.querySelectorAll('.jp-InputArea-prompt')]
      .some(p => p.innerText.includes('*'));
  return !running && code.length > 0 && code[code.length - 1].model.executionCount !== null;
}"""
