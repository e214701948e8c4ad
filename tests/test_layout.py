"""The package layout: data flows one way through the rooms, with no import circles.

Every `import` statement in `worldlab/` (at the top of a module or inside a function) is
read with `ast` and resolved to the module it loads; importing `a.b.c` also runs the
package `a.b`, so that counts as an import of it too. A room may import the leaves and the
rooms before it in `STAGES`, and its own modules; never a room after it."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "worldlab"
DESIGN = PACKAGE.parent / "docs" / "design.md"
LEAVES = {"paths", "atomic", "camera", "config", "loading", "metrics", "retired", "threads",
          "viz"}
STAGES = ["engines", "episodes", "model", "memory", "pretrained", "train", "evaluate", "play",
          "cli", "experiments"]  # the package's own __init__ / __main__ sit on top of everything
# experiments sits above cli: its plan parses each stage's command with cli's parser


def module_files() -> dict[str, Path]:
    """'worldlab.model.dit' -> its file ('worldlab.model' -> model/__init__.py)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("worldlab",) + path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts))]


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The worldlab modules that `name` loads, its own package's __init__ files excluded."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            if target.startswith("worldlab"):
                found.update(t for t in [target, *_ancestors(target)]
                             if t in modules and t not in _ancestors(name) + [package])
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def room(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "worldlab"


def rank(r: str) -> int:
    if r in LEAVES:
        return -1
    return STAGES.index(r) if r in STAGES else len(STAGES)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """room -> the other rooms it imports."""
    out: dict[str, set[str]] = {}
    for src, targets in graph.items():
        out.setdefault(room(src), set()).update(room(t) for t in targets if room(t) != room(src))
    return out


# ----------------------------------------------------------------------------------------


def test_every_room_is_placed():
    rooms = {room(m) for m in module_files()} - {"worldlab", "__main__"}
    assert rooms <= LEAVES | set(STAGES), sorted(rooms - LEAVES - set(STAGES))


def test_no_import_circles():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_no_room_imports_a_later_room():
    wrong = [(src, t) for src, targets in import_graph().items() for t in targets
             if room(src) != room(t) and rank(room(t)) > rank(room(src))]
    assert not wrong, wrong


def test_leaves_import_only_leaves():
    wrong = [(src, t) for src, targets in import_graph().items() if room(src) in LEAVES
             for t in targets if room(t) not in LEAVES]
    assert not wrong, wrong


def test_the_checker_sees_a_circle():
    """The checker is not vacuous: it finds a planted circle and a backwards import."""
    graph = import_graph()
    assert "worldlab.evaluate.registry" in graph["worldlab.evaluate.full"]
    assert "worldlab.evaluate.suite" in graph["worldlab.evaluate.registry"]  # the package too
    planted = {**graph, "worldlab.evaluate.registry": graph["worldlab.evaluate.registry"] |
               {"worldlab.evaluate.full"}}
    assert find_cycle(planted) is not None
    backwards = {**graph, "worldlab.model.dit": graph["worldlab.model.dit"] |
                 {"worldlab.play.session"}}
    assert any(rank(room(t)) > rank(room(s)) for s, ts in backwards.items() for t in ts)


def test_star_import_works():
    namespace: dict = {}
    exec("from worldlab import *", namespace)  # noqa: S102 - the statement under test
    import worldlab

    assert {"camera", "train", "evaluate", "play"} <= set(namespace)
    for name in worldlab.__all__:
        assert name in namespace, name


@pytest.mark.parametrize("name", ["train", "evaluate", "play", "model", "episodes"])
def test_rooms_load_through_the_one_import(name):
    import worldlab as wl

    assert getattr(wl, name).__name__ == f"worldlab.{name}"


def test_every_public_name_loads_on_a_cold_import():
    """In a fresh interpreter, `wl.<name>` works for every name in `__all__` (a module that
    only another import had loaded used to raise AttributeError), and every module or room
    at the top of the package is one of them."""
    code = ("import json, worldlab as wl; [getattr(wl, m) for m in wl.__all__]; "
            "print(json.dumps(wl.__all__))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    names = set(json.loads(done.stdout.strip().splitlines()[-1]))
    top = {p.stem for p in PACKAGE.glob("*.py")} | {p.parent.name for p in
                                                    PACKAGE.glob("*/__init__.py")}
    assert top - {"__init__", "__main__"} <= names, sorted(top - names)


def _module_map() -> str:
    text = DESIGN.read_text()
    start = text.index("\n## Module map\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_design_doc_maps_every_module_and_only_modules():
    """docs/design.md's module map names every worldlab/**/*.py (its path under worldlab/,
    in backticks), and every module line of the map ("- `path`: ...") names one that
    exists."""
    section = _module_map()
    files = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py"))
    missing = [f for f in files if f"`{f}`" not in section]
    assert not missing, f"docs/design.md's module map lacks {missing}"
    named = set(re.findall(r"^- `([\w/]+\.py)`:", section, re.M))  # the map's own lines
    assert not named - set(files), f"the map names modules that do not exist: " \
                                   f"{sorted(named - set(files))}"
