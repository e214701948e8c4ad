"""Play the 07_play notebook in a real JupyterLab, in a headless Chromium, with the keyboard.

    .venv/bin/python scripts/browser_play_check.py                  # defaults below
    .venv/bin/python scripts/browser_play_check.py --keys w w ArrowLeft d f --headed

`make test` runs it (through `ci/browser_checks.py`, with fewer keys); by hand it takes the
options below. It reads the game from stable `data-` attributes that the widget writes for
scripts (`widgets.STATS_ATTRS` on the stats line, `data-kind` on the status line), never
from the wording. What it does:

1. copies `notebooks/07_play.ipynb` into a temporary folder (so the committed notebook never
   gets outputs or changed parameters), with `interactive = True` and the chosen checkpoint;
2. starts JupyterLab from this virtual environment on a free port with a random token, with
   the app exposed to the page (`window.jupyterapp`) so the script can run all cells;
3. drives Chromium through Playwright: waits until every cell has run and the game's status
   line's kind is "ready" (the warm-up chunk is done), moves the pointer over the game image,
   presses keys one at a time and waits for the stats line's `data-step` to settle,
   screenshots the game image before and after, checks that the plotly minimap
   (FigureWidget) is drawn and that its trail grows; then a burst (4 presses 100 ms apart)
   and a held key (a press every 50 ms for 2 s, like keyboard auto-repeat), which must
   coalesce instead of queueing; types a prompt into the prompt box and clicks the prompt
   button, then keeps pressing until the stats line shows the event;
4. measures key-to-frame latency in the browser: from the `keydown` event to the `load` of
   the first new game image after it (performance.now() in the page, so the browser's own
   delays are in), beside the kernel's figure (`data-key-ms`) and the chunk's generation
   time (`data-chunk-ms`);
5. writes screenshots to `runs/browser_check/*.png`, `runs/browser_check/summary.json` and
   the key-to-frame times with the machine's load to `runs/browser_check/key_to_frame.json`,
   prints a short table, and stops JupyterLab (and its kernel) whatever happened.

Run it twice for the README: once on an idle machine and once with both cores busy (e.g.
while `python -m worldlab data record ... --workers 2` runs); the numbers go with the
machine's state, so `--results data/results/browser_play_idle.json --machine-state idle`
also writes them, with the command, commit and load averages, where the README links them.

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
import statistics
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from browser_lab import (ALL_RUN_JS, CHROMIUM_FLAGS, KERNEL_READY_JS, dismiss_build_dialogs,
                         free_port, notebook_copy, open_dialogs, start_lab, stop_lab)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "07_play.ipynb"
BUSY = ("loading", "busy")  # the status line's data-kind while the game works
WARNING_RE = re.compile(r"\S+:\d+: \w*Warning: ")  # how Python's `warnings` prints one
PROMPT_PLACEHOLDER = "an event, e.g. summon a monster"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", default="data/checkpoints/doom64",
                   help="world directory (relative to the repository root)")
    p.add_argument("--keys", nargs="+", default=["w", "w", "ArrowLeft", "d", "f", "w",
                                                 "ArrowRight", "s"],
                   help="key names as the browser reports them (KeyboardEvent.key)")
    p.add_argument("--prompt", default="an imp appears", help="typed into the prompt box")
    p.add_argument("--burst", type=int, default=4, help="presses in the burst, 100 ms apart")
    p.add_argument("--hold-s", type=float, default=2.0,
                   help="seconds of a held key (a press every 50 ms)")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "browser_check")
    p.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium binary")
    p.add_argument("--port", type=int, default=0, help="JupyterLab port (0: a free one)")
    p.add_argument("--load-timeout", type=float, default=600.0,
                   help="seconds to wait for the notebook to show the game")
    p.add_argument("--step-timeout", type=float, default=60.0,
                   help="seconds to wait for one key press to show a new step")
    p.add_argument("--headed", action="store_true", help="show the browser window")
    p.add_argument("--results", type=Path, default=None,
                   help="also write the numbers the README quotes here, e.g. "
                        "data/results/browser_play_idle.json")
    p.add_argument("--machine-state", default=None,
                   help="with --results: what else the machine was doing, e.g. 'idle'")
    args = p.parse_args(argv)
    if args.results is not None and not args.machine_state:
        p.error("--results needs --machine-state (e.g. 'idle', or what kept the cores busy)")
    if not Path(args.chromium).is_file():
        p.error(f"no Chromium at {args.chromium!r}: install one (apt-get install -y "
                f"chromium) or pass --chromium PATH")
    return args


# ----------------------------------------------------------------------------------------
# Reading the game from the page
# ----------------------------------------------------------------------------------------

# the stats line's data- attributes (widgets.STATS_ATTRS, camelCased by `dataset`) and the
# status line's data-kind; the last game on the page
GAME_JS = """() => {
  const last = sel => { const all = document.querySelectorAll(sel);
                        return all.length ? all[all.length - 1] : null; };
  const code = last('.worldlab-stats code[data-step]');
  const status = last('.worldlab-status [data-kind]');
  const notes = [...document.querySelectorAll('.worldlab-stats .worldlab-note')]
      .map(e => e.innerText.trim());
  const plot = document.querySelector('.js-plotly-plot');
  const traces = plot && plot.data ? plot.data.map(t => ({name: t.name,
      n: t.x ? t.x.length : 0, x: t.x ? Array.from(t.x).slice(-1)[0] : null,
      y: t.y ? Array.from(t.y).slice(-1)[0] : null,
      angle: t.marker ? t.marker.angle : null})) : null;
  const outputs = [...document.querySelectorAll('.widget-output')]
      .map(e => e.innerText.trim()).filter(t => t);
  const errors = [...document.querySelectorAll('.jp-RenderedText[data-mime-type=' +
      '"application/vnd.jupyter.stderr"]')].map(e => e.innerText.trim());
  return {stats: code ? Object.assign({}, code.dataset) : null, traces: traces,
          step: code ? parseInt(code.dataset.step) : null, notes: notes,
          kind: status ? status.dataset.kind : null,
          status: status ? status.parentElement.innerText.trim() : null,
          widget_outputs: outputs, cell_errors: errors,
          focused: document.activeElement ? document.activeElement.className : null};
}"""


def game_state(page) -> dict:
    state = page.evaluate(GAME_JS)
    # a Python warning in a cell's stderr (e.g. UnknownPromptWarning) is not an error
    warned = [e for e in state["cell_errors"] if WARNING_RE.match(e)]
    state["cell_errors"] = [e for e in state["cell_errors"] if e not in warned]
    state["cell_warnings"] = warned
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


def game_image(page):
    """The game screen: the first widget image after the keyboard help line."""
    return page.locator(".jp-OutputArea .widget-image").first


def shot(locator, path: Path) -> str:
    locator.screenshot(path=str(path))
    return hashlib.sha1(path.read_bytes()).hexdigest()[:12]


# ----------------------------------------------------------------------------------------
# The checks
# ----------------------------------------------------------------------------------------





# key-to-frame in the page: keydown (capture, before ipyevents) -> `load` of the next image
K2F_JS = """(img) => {
  const k = window.__k2f = {keys: [], loads: []};
  document.addEventListener('keydown', e => k.keys.push([e.key, performance.now()]), true);
  img.addEventListener('load', () => k.loads.push(performance.now()));
}"""


def open_and_run(page, url: str, timeout: float) -> dict:
    """Open the notebook, run all cells, wait until every cell has run and the game says
    "ready" (its warm-up chunk is done)."""
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
    t0 = time.time()
    wait_for(page, lambda s: s["step"] is not None and s["traces"], timeout)
    shown_s = round(time.time() - t0, 1)
    page.wait_for_function(ALL_RUN_JS, timeout=1000 * timeout, polling=250)
    state = wait_for(page, lambda s: s["kind"] == "ready", timeout)
    state.update(game_shown_s=shown_s, all_run_and_ready_s=round(time.time() - t0, 1))
    say(f"game shown after {shown_s} s, every cell run and the game ready after "
        f"{state['all_run_and_ready_s']} s")
    return state


def key_to_frame(page, since: float) -> list[dict]:
    """For each keydown after page time `since`: ms to the first new game image after it."""
    k = page.evaluate("() => window.__k2f")
    rows = []
    for key, t in k["keys"]:
        if t < since:
            continue
        later = [x for x in k["loads"] if x > t]
        rows.append({"key": key, "ms": round(later[0] - t) if later else None})
    return rows


def page_now(page) -> float:
    return page.evaluate("() => performance.now()")


def stats_ms(stats: dict | None, name: str) -> int | None:
    """A time from the stats line's data- attributes ("keyMs", "chunkMs"), None if blank."""
    value = (stats or {}).get(name) or ""
    return int(float(value)) if value else None


def press_keys(page, keys: list[str], out: Path, timeout: float) -> list[dict]:
    """Hover the game image, press each key, wait for the step to move; one row per key."""
    image, rows = game_image(page), []
    for i, key in enumerate(keys):
        image.hover()  # ipyevents listens only while the pointer is over the image
        before = game_state(page)
        h0 = shot(image, out / f"key{i:02d}_before.png")
        t_page = page_now(page)
        page.keyboard.press(key)
        after = wait_for(page, lambda s: (s["step"] or 0) > (before["step"] or 0), timeout)
        after = settled(page, after)  # a press plays a whole chunk out ("hold" policy)
        browser = key_to_frame(page, t_page)
        h1 = shot(image, out / f"key{i:02d}_after.png")
        trail = [t["n"] for t in after["traces"] or [] if t["name"] == "trail"]
        rows.append({"key": key, "step_before": before["step"], "step_after": after["step"],
                     "frame_changed": h0 != h1, "trail_points": trail[0] if trail else None,
                     "key_to_frame_ms": browser[0]["ms"] if browser else None,
                     "kernel_key_to_frame_ms": stats_ms(after["stats"], "keyMs"),
                     "chunk_ms": stats_ms(after["stats"], "chunkMs"),
                     "stats": after["stats"]})
        say(f"{key!r}: frame {before['step']} -> {after['step']}, key to frame "
            f"{rows[-1]['key_to_frame_ms']} ms in the browser "
            f"({rows[-1]['kernel_key_to_frame_ms']} ms in the kernel)")
    return rows


def press_many(page, key: str, gap_s: float, count: int, timeout: float,
               frames_per_press: int | None) -> dict:
    """`count` presses `gap_s` apart (a burst, or auto-repeat of a held key): how many frames
    they played, and, from the page's own clock, when the last new frame came after the
    last press."""
    game_image(page).hover()
    before = settled(page, game_state(page))
    t_page = page_now(page)
    for _ in range(count):
        page.keyboard.press(key)
        time.sleep(gap_s)
    after = wait_for(page, lambda s: (s["step"] or 0) > (before["step"] or 0), timeout)
    deadline = time.time() + 2 * timeout
    while time.time() < deadline:  # still for 2 s, no chunk in the making (or an error)
        now = settled(page, game_state(page), quiet=2.0)
        if now["step"] == after["step"] and now["kind"] not in BUSY:
            break
        after = now
    k = page.evaluate("() => window.__k2f")
    keys = [t for _, t in k["keys"] if t >= t_page]
    loads = [t for t in k["loads"] if t > keys[0]]
    browser = key_to_frame(page, t_page)
    return {"key": key, "presses": count, "gap_ms": round(1e3 * gap_s),
            "pressing_ms": round(keys[-1] - keys[0]),
            "frames_played": (after["step"] or 0) - (before["step"] or 0),
            "frames_seen": len(loads),
            "first_key_to_frame_ms": browser[0]["ms"] if browser else None,
            "chunk_game_ms": stats_ms(after["stats"], "gameMs"),
            "frames_per_press": frames_per_press,
            # the pace frames actually came at (game time plus the cost of showing each)
            "frame_interval_ms": round(statistics.median(
                b - a for a, b in zip(loads, loads[1:]))) if len(loads) > 1 else None,
            "last_frame_after_last_press_ms": round(loads[-1] - keys[-1]) if loads else None,
            "status": after["status"], "stats": after["stats"]}


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
        if (state["stats"] or {}).get("event") == prompt:
            break
    return {"prompt": prompt, "stats_seen": seen, "notes": state["notes"],
            "event_shown": (state["stats"] or {}).get("event") == prompt}


def run_checks(args, url: str) -> dict:
    from playwright.sync_api import sync_playwright

    out, summary = args.out, {"url": url.split("?")[0], "keys": args.keys}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, headless=not args.headed,
                                     args=CHROMIUM_FLAGS)
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
        game_image(page).evaluate(K2F_JS)
        summary["presses"] = press_keys(page, args.keys, out, args.step_timeout)
        page.screenshot(path=str(out / "01_after_keys.png"), full_page=True)
        say(f"a burst: {args.burst} presses 100 ms apart")
        steps = {p["step_after"] - p["step_before"] for p in summary["presses"]
                 if p["step_after"] is not None and p["step_before"] is not None}
        per_press = steps.pop() if len(steps) == 1 else None  # one chunk's frames
        summary["burst"] = press_many(page, "w", 0.1, args.burst, args.step_timeout,
                                      per_press)
        say(f"a held key: a press every 50 ms for {args.hold_s} s")
        summary["held"] = press_many(page, "ArrowLeft", 0.05, int(args.hold_s / 0.05),
                                     args.step_timeout, per_press)
        summary["prompt"] = send_prompt(page, args.prompt, 8, args.step_timeout)
        page.locator(".js-plotly-plot").first.screenshot(path=str(out / "02_minimap.png"))
        page.screenshot(path=str(out / "03_after_prompt.png"), full_page=True)
        summary["end"] = game_state(page)
        summary["console"] = console[-20:]
        browser.close()
    return summary


def latency(summary: dict) -> dict:
    """Median / min / max key-to-frame of the single presses, browser and kernel, and of
    the chunk's generation time (ms)."""
    out = {}
    for name in ("key_to_frame_ms", "kernel_key_to_frame_ms", "chunk_ms"):
        ms = sorted(p[name] for p in summary.get("presses", []) if p[name] is not None)
        out[name] = {"median": ms[len(ms) // 2], "min": ms[0], "max": ms[-1]} if ms else None
    return out


def no_backlog(run: dict | None, summary: dict) -> bool:
    """Presses faster than the game did not queue: the last new frame came within what the
    loop can owe after the last press (`live.LiveLoop`: one chunk on screen, one waiting in
    the player, and the chunk made for the last press), three chunks of frames at the pace
    they came (`frame_interval_ms`), plus twice the slowest key-to-frame (that chunk's
    making and the browser's delay). A queue owes a chunk per press: the held key's 20
    presses would overrun it by seconds (a 4-press burst can fit either way)."""
    k2f = (summary.get("latency") or {}).get("key_to_frame_ms")
    if not run or not k2f or run["last_frame_after_last_press_ms"] is None \
            or not run["frame_interval_ms"] or not run["frames_per_press"]:
        return False
    slowest = max(k2f["max"], run["first_key_to_frame_ms"] or 0)
    owed = 3 * run["frames_per_press"] * run["frame_interval_ms"] + 2 * slowest
    return run["frames_played"] > 0 and run["last_frame_after_last_press_ms"] <= owed


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
        "a burst of presses did not queue": no_backlog(summary.get("burst"), summary),
        "a held key did not queue": no_backlog(summary.get("held"), summary),
        "prompt reached the screen": summary.get("prompt", {}).get("event_shown", False),
        "no callback errors": not end.get("widget_outputs") and not end.get("cell_errors"),
    }


def key_to_frame_record(summary: dict, args) -> dict:
    """runs/browser_check/key_to_frame.json: every single press's times and how busy the
    machine was, so a number is never read without its load."""
    keep = ("key", "key_to_frame_ms", "kernel_key_to_frame_ms", "chunk_ms")
    return {"what": "key to frame in headless Chromium: keydown in the page to the load of "
                    "the next game image (ms); kernel: press received to frame handed over; "
                    "chunk: the chunk's generation time",
            "checkpoint": args.checkpoint, "measured": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "cpus": summary.get("cpus"), "load_average_start": summary.get("load_average_start"),
            "load_average_end": summary.get("load_average_end"), **summary["latency"],
            "presses": [{k: p.get(k) for k in keep} for p in summary.get("presses", [])]}


def results_record(summary: dict, machine_state: str, command: str) -> dict:
    """The numbers the README quotes, with how and where they were measured."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, text=True,
                           capture_output=True).stdout.strip()
    keep = ("key", "step_before", "step_after", "key_to_frame_ms", "kernel_key_to_frame_ms")
    return {"what": "key to frame of notebooks/07_play.ipynb in JupyterLab, headless Chromium, "
                    "real key presses: keydown in the page to the load of the next game image; "
                    "'kernel': the game's stats line (press received to frame handed over)",
            "machine_state": machine_state, "command": command,
            "commit": commit + (" with uncommitted changes" if dirty else ""),
            "measured": time.strftime("%Y-%m-%d"), "cpus": summary.get("cpus"),
            "load_average_start": summary.get("load_average_start"),
            "load_average_end": summary.get("load_average_end"),
            **summary["latency"],
            "presses": [{k: p[k] for k in keep} for p in summary.get("presses", [])],
            **{name: {k: v for k, v in (summary.get(name) or {}).items()
                      if k not in ("stats", "status")} for name in ("burst", "held")},
            "game_shown_s": summary.get("start", {}).get("game_shown_s"),
            "all_cells_run_and_ready_s": summary.get("start", {}).get("all_run_and_ready_s"),
            "warm_up": summary.get("start", {}).get("status"), "checks": summary["checks"]}


def main(argv=None) -> int:
    args = parse_args(argv)
    # a plain SIGTERM (e.g. from `timeout`) would skip the `finally` that stops JupyterLab
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.out.exists():
        shutil.rmtree(args.out)  # only this tool writes here: stale screenshots would lie
    args.out.mkdir(parents=True)
    token, port = secrets.token_hex(8), args.port or free_port()
    load_start = os.getloadavg()  # 1, 5, 15 min: how busy the machine was
    with tempfile.TemporaryDirectory(prefix="wl_browser_") as tmp:
        nb = notebook_copy(NOTEBOOK, Path(tmp), args.checkpoint)
        lab = start_lab(Path(tmp), port, token, args.out / "jupyterlab.log")
        say(f"JupyterLab on port {port}, serving a copy of {NOTEBOOK.name} in {tmp}")
        try:
            summary = run_checks(args, f"http://127.0.0.1:{port}/lab/tree/{nb.name}"
                                       f"?token={token}")
            summary["load_average_start"] = load_start
            summary["cpus"] = os.cpu_count()
        finally:
            stop_lab(lab)
    summary["latency"] = latency(summary)
    summary["load_average_end"] = os.getloadavg()
    summary["checks"] = verdicts(summary)
    from worldlab.atomic import atomic_write_bytes

    atomic_write_bytes(args.out / "summary.json",
                       json.dumps(summary, indent=1, default=str).encode())
    atomic_write_bytes(args.out / "key_to_frame.json",
                       (json.dumps(key_to_frame_record(summary, args), indent=1) + "\n").encode())
    if args.results is not None:
        record = results_record(summary, args.machine_state, " ".join(sys.argv))
        atomic_write_bytes(args.results, (json.dumps(record, indent=2) + "\n").encode())
    print(f"{'key':>11} {'frame':>9} {'changed':>8} {'trail':>6} {'key->frame ms':>14} "
          f"{'(kernel)':>9}")
    for p in summary.get("presses", []):
        print(f"{p['key']:>11} {p['step_before']!s:>4}->{p['step_after']!s:<4} "
              f"{p['frame_changed']!s:>8} {p['trail_points']!s:>6} "
              f"{p['key_to_frame_ms']!s:>14} {p['kernel_key_to_frame_ms']!s:>9}")
    for name in ("burst", "held"):
        r = summary.get(name)
        if r:
            print(f"{name}: {r['presses']} presses of {r['key']!r} {r['gap_ms']} ms apart "
                  f"({r['pressing_ms']} ms) played {r['frames_played']} frames; first key to "
                  f"frame {r['first_key_to_frame_ms']} ms; last frame "
                  f"{r['last_frame_after_last_press_ms']} ms after the last press")
    print(f"key to frame (ms): {summary['latency']}; {summary.get('cpus')} CPUs, load average "
          f"{summary.get('load_average_start')} at the start")
    for name, ok in summary["checks"].items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    print(f"screenshots and summary.json in {args.out}")
    return 0 if all(summary["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
