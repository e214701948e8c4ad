"""Open the full suite's HTML report in a headless Chromium and check that it reads.

    .venv/bin/python scripts/browser_report_check.py runs/eval/benchmark/full.html

`make test` runs it on notebook 08's report (through `ci/browser_checks.py`, with
`browser_play_check.py`, whose setup it shares: the `browser` extra and Debian's Chromium).
It loads the page from disk with the network blocked, so a figure that needs anything but
the page itself fails, then checks:

- no script error and no console error;
- every plotly figure is drawn (its `div.js-plotly-plot` holds an SVG with at least one trace);
- every frame strip is decoded (`img.naturalWidth > 0`);
- one table per world, with a header row and at least one body row.

It writes a full-page screenshot and `summary.json` to `--out` and prints the counts.
Exit status: 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from browser_lab import CHROMIUM_FLAGS

COUNTS = """() => ({
  worlds: document.querySelectorAll('h2').length,
  tables: document.querySelectorAll('table').length,
  table_rows: [...document.querySelectorAll('table')].map(t => t.rows.length),
  figures: document.querySelectorAll('div.js-plotly-plot').length,
  figures_drawn: [...document.querySelectorAll('div.js-plotly-plot')].filter(
      d => d.querySelector('svg.main-svg') && d.querySelectorAll('g.trace').length > 0).length,
  images: document.querySelectorAll('img').length,
  images_decoded: [...document.querySelectorAll('img')].filter(
      i => i.complete && i.naturalWidth > 0).length,
})"""


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path, help="full.html written by `eval --suite full`")
    p.add_argument("--out", type=Path, default=Path("runs/browser_check/report"),
                   help="folder for the screenshot and summary.json")
    p.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium binary")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for drawing")
    args = p.parse_args(argv)
    if not args.report.is_file():
        p.error(f"no report at {str(args.report)!r}: run `python -m worldlab eval --suite "
                f"full` first")
    if not Path(args.chromium).is_file():
        p.error(f"no Chromium at {args.chromium!r}: install one (apt-get install -y "
                f"chromium) or pass --chromium PATH")
    return args


def check_page(args) -> dict:
    from playwright.sync_api import sync_playwright

    errors, blocked = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, headless=True,
                                     args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
            page.on("console", lambda m: m.type == "error" and errors.append(
                f"console: {m.text}"))
            page.route(lambda url: not url.startswith("file:"),
                       lambda route: (blocked.append(route.request.url), route.abort()))
            t0 = time.perf_counter()
            page.goto(args.report.resolve().as_uri(), wait_until="load")
            counts = page.evaluate(COUNTS)
            while (counts["figures_drawn"] < counts["figures"]
                   or counts["images_decoded"] < counts["images"]) \
                    and time.perf_counter() - t0 < args.timeout:
                time.sleep(0.5)
                counts = page.evaluate(COUNTS)
            seconds = time.perf_counter() - t0
            args.out.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out / "report.png"), full_page=True)
        finally:
            browser.close()
    return {**counts, "seconds_to_drawn": round(seconds, 2), "errors": errors,
            "blocked_requests": blocked}


def verdicts(s: dict) -> dict[str, bool]:
    return {"no errors": not s["errors"],
            "nothing fetched from outside the page": not s["blocked_requests"],
            "every figure drawn": s["figures"] > 0 and s["figures_drawn"] == s["figures"],
            "every strip decoded": s["images"] > 0 and s["images_decoded"] == s["images"],
            "a table per world": s["worlds"] > 0 and s["tables"] >= s["worlds"]
                                 and all(n >= 2 for n in s["table_rows"])}


def main(argv=None) -> int:
    args = parse_args(argv)
    summary = check_page(args)
    summary["checks"] = verdicts(summary)
    summary["report"] = str(args.report)
    from worldlab.atomic import atomic_write_bytes

    atomic_write_bytes(args.out / "summary.json", (json.dumps(summary, indent=2) + "\n").encode())
    print(f"{args.report}: {summary['worlds']} worlds, {summary['tables']} tables, "
          f"{summary['figures_drawn']}/{summary['figures']} figures drawn, "
          f"{summary['images_decoded']}/{summary['images']} strips decoded in "
          f"{summary['seconds_to_drawn']} s")
    for err in summary["errors"] + summary["blocked_requests"]:
        print("  ", err)
    for name, ok in summary["checks"].items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    print(f"screenshot: {args.out / 'report.png'}")
    return 0 if all(summary["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
