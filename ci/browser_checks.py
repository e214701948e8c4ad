"""`make test`'s browser checks: the play notebook and the benchmark's HTML report in headless
Chromium (scripts/browser_play_check.py, scripts/browser_report_check.py).

    .venv/bin/python ci/browser_checks.py [--report runs/eval_nb08/full.html]

They need Debian's `chromium` (ci/setup.sh installs it with apt-get when run as root) and the
`playwright` package (the `browser` extra, which setup installs). Where either is missing
the run says which and why, and skips them (exit 0): a laptop without root still tests
everything else. The report is the one notebook 08 writes at CI sizes, so this runs after the
notebooks. The play check runs with fewer keys than by hand, to keep both under ~2 minutes;
its key-to-frame times go to runs/browser_check/key_to_frame.json.
Exit status: 0 when both passed (or were skipped), 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
REPORT = ROOT / "runs" / "eval_nb08" / "full.html"  # notebook 08's `out` at CI sizes
PLAY_ARGS = ["--keys", "w", "ArrowLeft", "w", "d", "w", "--burst", "4", "--hold-s", "1"]


def missing() -> list[str]:
    """Why the browser checks cannot run here (empty: they can)."""
    why = []
    if not CHROMIUM.is_file():
        why.append(f"no Chromium at {CHROMIUM} (ci/setup.sh installs Debian's chromium with "
                   f"apt-get only when run as root; as root: apt-get install -y chromium)")
    if importlib.util.find_spec("playwright") is None:
        why.append("the playwright package is not installed (.venv/bin/pip install -e "
                   "'.[browser]')")
    return why


def run(name: str, cmd: list[str]) -> bool:
    t0 = time.perf_counter()
    rc = subprocess.run([sys.executable, *cmd], cwd=ROOT).returncode
    print(f"[browser] {name}: {'passed' if rc == 0 else f'FAILED (exit {rc})'} in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    return rc == 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--report", type=Path, default=REPORT, help="the HTML report to check")
    args = p.parse_args(argv)
    why = missing()
    if why:
        print("[browser] skipped the browser checks (play, HTML report): " + "; ".join(why))
        return 0
    if not args.report.is_file():
        print(f"[browser] no report at {args.report}: it is written by notebooks/"
              f"08_benchmark.ipynb at CI sizes (ci/run_notebooks.py); run that first")
        return 1
    ok = [run("play (notebooks/07_play.ipynb in JupyterLab)",
              ["scripts/browser_play_check.py", *PLAY_ARGS, "--chromium", str(CHROMIUM)]),
          run(f"HTML report ({args.report})",
              ["scripts/browser_report_check.py", str(args.report), "--chromium",
               str(CHROMIUM)])]
    print(f"browser: {sum(ok)} passed, {len(ok) - sum(ok)} failed")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
