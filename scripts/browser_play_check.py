"""Play the 07_play notebook in a real JupyterLab, in a headless Chromium, with the keyboard.

    .venv/bin/python scripts/browser_play_check.py                  # defaults below
    .venv/bin/python scripts/browser_play_check.py --keys w w ArrowLeft d f --headed

A developer tool, not part of CI (`make test` never runs it). What it does:

1. copies `notebooks/07_play.ipynb` into a temporary folder (so the committed notebook never
   gets outputs or changed parameters), with `interactive = True` and the chosen checkpoint;
2. starts JupyterLab from this virtual environment on a free port with a random token, with
   the app exposed to the page (`window.jupyterapp`) so the script can run all cells;
3. drives Chromium through Playwright: waits for the game widget, moves the pointer over the
   game image, presses keys one at a time and waits for the stats line's step counter to move,
   screenshots the game image before and after, checks that the plotly minimap
   (FigureWidget) is drawn and that its trail grows, types a prompt into the prompt box and
   clicks the prompt button, then keeps pressing until the stats line shows the event;
4. writes screenshots to `runs/browser_check/*.png` and `runs/browser_check/summary.json`,
   prints a short table, and stops JupyterLab (and its kernel) whatever happened.

Needs: the `browser` extra (`pip install -e .[browser]`, i.e. the `playwright` package) and
a Chromium binary. Playwright's own browser download is not used: install the distribution's
Chromium (Debian/Ubuntu: `apt-get install -y chromium`) and pass `--chromium` if it is not at
/usr/bin/chromium. Exit status: 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "07_play.ipynb"
STEP_RE = re.compile(r"step (\d+)")
PROMPT_PLACEHOLDER = "an event, e.g. summon a monster"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", default="data/checkpoints/doom64",
                   help="world directory (relative to the repository root)")
    p.add_argument("--keys", nargs="+", default=["w", "w", "ArrowLeft", "d", "f", "w",
                                                 "ArrowRight", "s"],
                   help="key names as the browser reports them (KeyboardEvent.key)")
    p.add_argument("--prompt", default="an imp appears", help="typed into the prompt box")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "browser_check")
    p.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium binary")
    p.add_argument("--port", type=int, default=0, help="JupyterLab port (0: a free one)")
    p.add_argument("--load-timeout", type=float, default=600.0,
                   help="seconds to wait for the notebook to show the game")
    p.add_argument("--step-timeout", type=float, default=60.0,
                   help="seconds to wait for one key press to show a new step")
    p.add_argument("--headed", action="store_true", help="show the browser window")
    args = p.parse_args(argv)
    if not Path(args.chromium).is_file():
        p.error(f"no Chromium at {args.chromium!r}: install one (apt-get install -y "
                f"chromium) or pass --chromium PATH")
    return args


# ----------------------------------------------------------------------------------------
# JupyterLab on a copy of the notebook
# ----------------------------------------------------------------------------------------


def notebook_copy(folder: Path, checkpoint: str) -> Path:
    """07_play with interactive = True and the checkpoint, in `folder` (outputs stripped)."""
    nb = json.loads(NOTEBOOK.read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    lines = "".join(cell["source"]).splitlines()
    values = {"interactive": "True", "checkpoint": json.dumps(checkpoint)}
    for i, line in enumerate(lines):
        name = line.split("=")[0].strip()
        if name in values:
            comment = line[line.index("#"):] if "#" in line else ""
            lines[i] = f"{name} = {values[name]}  {comment}".rstrip()
    cell["source"] = "\n".join(lines)
    path = folder / NOTEBOOK.name
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


# ----------------------------------------------------------------------------------------
# Reading the game from the page
# ----------------------------------------------------------------------------------------

GAME_JS = """() => {
  const code = [...document.querySelectorAll('.widget-html code')]
      .map(e => e.innerText).filter(t => /^step \\d+/.test(t));
  const plot = document.querySelector('.js-plotly-plot');
  const traces = plot && plot.data ? plot.data.map(t => ({name: t.name,
      n: t.x ? t.x.length : 0, x: t.x ? Array.from(t.x).slice(-1)[0] : null,
      y: t.y ? Array.from(t.y).slice(-1)[0] : null,
      angle: t.marker ? t.marker.angle : null})) : null;
  const outputs = [...document.querySelectorAll('.widget-output')]
      .map(e => e.innerText.trim()).filter(t => t);
  const errors = [...document.querySelectorAll('.jp-RenderedText[data-mime-type=' +
      '"application/vnd.jupyter.stderr"]')].map(e => e.innerText.trim());
  return {stats: code.length ? code[code.length - 1] : null, traces: traces,
          widget_outputs: outputs, cell_errors: errors,
          focused: document.activeElement ? document.activeElement.className : null};
}"""


def game_state(page) -> dict:
    state = page.evaluate(GAME_JS)
    m = STEP_RE.match(state["stats"] or "")
    state["step"] = int(m.group(1)) if m else None
    return state


def wait_for(page, pred, timeout: float, every: float = 0.25) -> dict:
    """Poll game_state until pred(state) holds; returns the last state either way."""
    deadline = time.time() + timeout
    while True:
        state = game_state(page)
        if pred(state) or time.time() > deadline:
            return state
        time.sleep(every)


def say(msg: str) -> None:
    print(f"[browser-check] {msg}", flush=True)


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


def game_image(page):
    """The game screen: the first widget image after the keyboard help line."""
    return page.locator(".jp-OutputArea .widget-image").first


def shot(locator, path: Path) -> str:
    locator.screenshot(path=str(path))
    return hashlib.sha1(path.read_bytes()).hexdigest()[:12]


# ----------------------------------------------------------------------------------------
# The checks
# ----------------------------------------------------------------------------------------


KERNEL_READY_JS = """async () => {
  const nb = window.jupyterapp.shell.currentWidget;
  await nb.context.ready;
  await nb.sessionContext.ready;
  const kernel = nb.sessionContext.session.kernel;
  while (kernel.status !== 'idle') await new Promise(r => setTimeout(r, 200));
  return kernel.name;
}"""


def open_and_run(page, url: str, timeout: float) -> dict:
    """Open the notebook, run all cells, wait until the game shows its stats line."""
    page.goto(url)
    page.wait_for_selector(".jp-Notebook", timeout=120_000)
    say("notebook open; waiting for the kernel")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.commands"
                           ".hasCommand('notebook:run-all-cells')", timeout=120_000)
    # Running before the notebook's session is ready opens "Select Kernel" instead
    kernel = page.evaluate(KERNEL_READY_JS)
    say(f"kernel {kernel!r} ready")
    dismiss_build_dialogs(page)
    # fire and forget: the command's promise waits on any dialog it opens
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    say("running all cells; waiting for the game's stats line")
    return wait_for(page, lambda s: s["step"] is not None and s["traces"], timeout)


def press_keys(page, keys: list[str], out: Path, timeout: float) -> list[dict]:
    """Hover the game image, press each key, wait for the step to move; one row per key."""
    image, rows = game_image(page), []
    for i, key in enumerate(keys):
        image.hover()  # ipyevents listens only while the pointer is over the image
        before = game_state(page)
        h0 = shot(image, out / f"key{i:02d}_before.png")
        page.keyboard.press(key)
        after = wait_for(page, lambda s: (s["step"] or 0) > (before["step"] or 0), timeout)
        after = settled(page, after)  # a press plays a whole chunk out ("hold" policy)
        say(f"{key!r}: step {before['step']} -> {after['step']}")
        h1 = shot(image, out / f"key{i:02d}_after.png")
        trail = [t["n"] for t in after["traces"] or [] if t["name"] == "trail"]
        rows.append({"key": key, "step_before": before["step"], "step_after": after["step"],
                     "frame_changed": h0 != h1, "trail_points": trail[0] if trail else None,
                     "stats": after["stats"]})
    return rows


def settled(page, state: dict, quiet: float = 0.6) -> dict:
    """The game state once the step counter has not moved for `quiet` seconds."""
    while True:
        time.sleep(quiet)
        now = game_state(page)
        if now["step"] == state["step"]:
            return now
        state = now


def send_prompt(page, prompt: str, keys: int, timeout: float) -> dict:
    """Type the prompt, click the button, then press 'w' until the event is on screen."""
    box = page.get_by_placeholder(PROMPT_PLACEHOLDER)
    box.fill(prompt)
    page.get_by_role("button", name="prompt at next chunk").click()
    seen, state = [], game_state(page)
    for _ in range(keys):
        game_image(page).hover()
        step = state["step"] or 0
        page.keyboard.press("w")
        state = settled(page, wait_for(page, lambda s: (s["step"] or 0) > step, timeout))
        seen.append(state["stats"])
        if f"event: {prompt!r}" in (state["stats"] or ""):
            break
    return {"prompt": prompt, "stats_seen": seen,
            "event_shown": f"event: {prompt!r}" in (state["stats"] or "")}


def run_checks(args, url: str) -> dict:
    from playwright.sync_api import sync_playwright

    out, summary = args.out, {"url": url.split("?")[0], "keys": args.keys}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, headless=not args.headed,
                                     args=["--no-sandbox"])  # root in a container
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        console = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}")
                if m.type in ("error", "warning") else None)
        t0 = time.time()
        start = open_and_run(page, url, args.load_timeout)
        summary["load_s"] = round(time.time() - t0, 1)
        summary["start"] = start
        summary["dialogs_dismissed"] = dismiss_build_dialogs(page)
        summary["dialogs_open"] = open_dialogs(page)
        page.screenshot(path=str(out / "00_loaded.png"), full_page=True)
        if start["step"] is None:
            summary["error"] = "the game's stats line never appeared"
            return summary | {"console": console[-20:]}
        summary["presses"] = press_keys(page, args.keys, out, args.step_timeout)
        page.screenshot(path=str(out / "01_after_keys.png"), full_page=True)
        summary["prompt"] = send_prompt(page, args.prompt, 8, args.step_timeout)
        page.locator(".js-plotly-plot").first.screenshot(path=str(out / "02_minimap.png"))
        page.screenshot(path=str(out / "03_after_prompt.png"), full_page=True)
        summary["end"] = game_state(page)
        summary["console"] = console[-20:]
        browser.close()
    return summary


def verdicts(summary: dict) -> dict[str, bool]:
    presses, end = summary.get("presses", []), summary.get("end") or {}
    trails = [p["trail_points"] for p in presses if p["trail_points"] is not None]
    return {
        "game shown": summary.get("start", {}).get("step") is not None,
        # every press plays one chunk out: the same number of steps (> 0) for each key
        "every key moved the step": bool(presses) and len(
            {(p["step_after"] or 0) - (p["step_before"] or 0) for p in presses} - {0}) == 1
        and all((p["step_after"] or 0) > (p["step_before"] or 0) for p in presses),
        "frame changed after keys": any(p["frame_changed"] for p in presses),
        "minimap drawn": bool(end.get("traces")),
        "minimap trail grew": len(trails) > 1 and trails[-1] > trails[0],
        "prompt reached the screen": summary.get("prompt", {}).get("event_shown", False),
        "no callback errors": not end.get("widget_outputs") and not end.get("cell_errors"),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    # a plain SIGTERM (e.g. from `timeout`) would skip the `finally` that stops JupyterLab
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.out.exists():
        shutil.rmtree(args.out)  # only this tool writes here: stale screenshots would lie
    args.out.mkdir(parents=True)
    token, port = secrets.token_hex(8), args.port or free_port()
    with tempfile.TemporaryDirectory(prefix="wl_browser_") as tmp:
        nb = notebook_copy(Path(tmp), args.checkpoint)
        lab = start_lab(Path(tmp), port, token, args.out / "jupyterlab.log")
        say(f"JupyterLab on port {port}, serving a copy of {NOTEBOOK.name} in {tmp}")
        try:
            summary = run_checks(args, f"http://127.0.0.1:{port}/lab/tree/{nb.name}"
                                       f"?token={token}")
        finally:
            stop_lab(lab)
    summary["checks"] = verdicts(summary)
    from worldlab.atomic import atomic_write_bytes

    atomic_write_bytes(args.out / "summary.json",
                       json.dumps(summary, indent=1, default=str).encode())
    print(f"{'key':>11} {'step':>9} {'frame changed':>14} {'trail':>6}")
    for p in summary.get("presses", []):
        print(f"{p['key']:>11} {p['step_before']!s:>4}->{p['step_after']!s:<4} "
              f"{p['frame_changed']!s:>14} {p['trail_points']!s:>6}")
    for name, ok in summary["checks"].items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    print(f"screenshots and summary.json in {args.out}")
    return 0 if all(summary["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
