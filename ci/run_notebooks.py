"""Execute every notebook in course order with the sizes of one profile of ci/params.yaml.

    python ci/run_notebooks.py --profile ci --out runs/ci          # what `make test` runs
    python ci/run_notebooks.py --only notebooks/00_quickstart.ipynb --profile demo --out runs/demo

papermill injects into each notebook's one `parameters` cell only the keys that cell
declares. Executed copies land in --out; a notebook that raises, or whose executed copy shows
more than one figure in a cell (`figures_per_cell`) or points outside a 3D figure's axes
(`scenes_out_of_view`), fails the run (exit 1).
By default it runs notebooks/ only: the tutorials keep their outputs and `make test` checks
them with nbval (`pytest --nbval tutorials/`), which executes them already.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIRS = ("notebooks", "tutorials")


def notebook_paths(root: Path = ROOT) -> list[Path]:
    """Every notebook of the course: notebooks/ then tutorials/, each in name order."""
    return [p for d in NOTEBOOK_DIRS for p in sorted((root / d).glob("*.ipynb"))]


def parameters_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"
            and "parameters" in c.get("metadata", {}).get("tags", [])]


def declared_parameters(nb: dict) -> dict:
    """name -> literal value of the assignments in the one `parameters` cell.

    Raises ValueError if there is not exactly one such cell or if it holds anything but
    `name = <literal>` lines (papermill's help shows their trailing comments).
    """
    cells = parameters_cells(nb)
    if len(cells) != 1:
        raise ValueError(f"expected exactly one cell tagged 'parameters', found {len(cells)}")
    src = "".join(cells[0]["source"])
    out = {}
    for node in ast.parse(src).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            raise ValueError(f"parameters cell may only hold `name = literal` lines, got "
                             f"{ast.unparse(node)!r}")
        try:
            out[node.targets[0].id] = ast.literal_eval(node.value)
        except ValueError:
            raise ValueError(f"parameter {node.targets[0].id!r} must be a literal, got "
                             f"{ast.unparse(node.value)!r}") from None
    return out


PLOTLY = "application/vnd.plotly.v1+json"  # the mime type of a figure (viz.RENDERER)


def _title(fig: dict) -> str | None:
    title = fig.get("layout", {}).get("title")
    return title.get("text") if isinstance(title, dict) else title


def figures_per_cell(nb: dict) -> list[str]:
    """One line per cell of an executed notebook that holds more than one plotly figure: a
    live plot that appended a copy per update instead of redrawing one (wl.viz.LiveLoss), or
    a loop that showed a figure per engine where one figure of subplots reads better."""
    problems = []
    for cell in nb["cells"]:
        titles = [_title(o["data"][PLOTLY]) for o in cell.get("outputs", [])
                  if PLOTLY in o.get("data", {})]
        if len(titles) > 1:
            problems.append(f"cell {cell.get('id')}: {len(titles)} plotly figures (titled "
                            f"{sorted(set(map(str, titles)))}); a cell shows at most one "
                            f"(redraw it in place: wl.viz.LiveLoss; one figure of subplots)")
    return problems


def scenes_out_of_view(nb: dict) -> list[str]:
    """One line per stored 3D figure that draws points outside its own axis ranges
    (`wl.viz.check_in_view`): such points are invisible, and the figure looks empty."""
    import plotly.graph_objects as go

    from worldlab.viz import check_in_view

    problems = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            if PLOTLY in out.get("data", {}):
                try:
                    check_in_view(go.Figure(out["data"][PLOTLY]))
                except ValueError as e:
                    problems.append(f"cell {cell.get('id')}: {e}")
    return problems


def load_profile(path: Path, profile: str) -> dict:
    import yaml

    data = yaml.safe_load(Path(path).read_text()) or {}
    if profile not in data:
        raise SystemExit(f"profile {profile!r} not in {path}; it has {sorted(data)}")
    return data[profile] or {}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--params", default=str(ROOT / "ci" / "params.yaml"))
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--out", default=str(ROOT / "runs" / "ci"))
    ap.add_argument("--only", nargs="*", help="run just these notebooks")
    ap.add_argument("--kernel", default="worldlab")
    args = ap.parse_args(argv)

    import papermill as pm

    sizes = load_profile(Path(args.params), args.profile)
    paths = [Path(p).resolve() for p in args.only] if args.only else \
        [p for p in notebook_paths() if p.parent.name == "notebooks"]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    timings, failed = {}, []
    for path in paths:
        declared = declared_parameters(json.loads(path.read_text()))
        params = {k: v for k, v in sizes.items() if k in declared}
        target = out_dir / path.name
        print(f"[notebooks] {path.relative_to(ROOT)} with {params}", flush=True)
        t0 = time.perf_counter()
        try:
            # store_widget_state=False: a plotly FigureWidget's state carries plotly.js
            # itself (~5 MB); executed copies keep the outputs, not the live widgets
            pm.execute_notebook(str(path), str(target), parameters=params,
                                kernel_name=args.kernel, cwd=str(path.parent),
                                progress_bar=False, store_widget_state=False)
            executed = json.loads(target.read_text())
            problems = figures_per_cell(executed) + scenes_out_of_view(executed)
        except Exception as e:  # papermill raises PapermillExecutionError with the cell
            problems = [str(e)]
        if problems:
            failed.append(path.name)
            print(f"[notebooks] FAILED {path.name}: " + "; ".join(problems), file=sys.stderr,
                  flush=True)
        timings[path.name] = round(time.perf_counter() - t0, 1)
        print(f"[notebooks] {path.name}: {timings[path.name]} s", flush=True)
    (out_dir / "timings.json").write_text(json.dumps(timings, indent=2))
    print(f"notebooks: {len(paths) - len(failed)} passed, {len(failed)} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
