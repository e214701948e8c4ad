"""An experiment spec (`experiments/<name>.yaml`, format in docs/experiments.md): load it,
check its shape, and keep the line of every value so an error can name it.

    spec = load_spec("experiments/memory.yaml")
    spec.stages[2].name, spec.stages[2].line   # 'train', 31

`load_spec` checks the shape alone (keys, kinds, references between stages); `plan.plan`
checks what needs the package (commands, overrides, seeds, inputs) before any work.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

KINDS = ("restore", "record", "encode", "train", "package", "evaluate", "table", "ship")
SPEC_KEYS = ("name", "title", "result", "notes", "vars", "seeds", "after", "stages")
STAGE_KEYS = ("name", "kind", "run", "variants", "seeds", "over", "each", "threads", "resume",
              "inputs", "outputs", "from", "to", "files", "launcher")
LAUNCHERS = ("python", "accelerate")
UNHASHED = ("title", "notes")  # prose: editing it does not change what the spec makes


class SpecError(ValueError):
    """A spec that cannot run; the message starts with `file:line:`."""


@dataclass(frozen=True)
class Stage:
    name: str
    kind: str
    line: int
    run: str | None = None
    variants: dict[str, dict] = field(default_factory=dict)  # name -> template values
    seeds: tuple[int, ...] | None = None
    over: str | None = None            # a stage whose jobs this one repeats
    each: dict[str, tuple[str, str]] = field(default_factory=dict)  # var -> (stage, item)
    threads: int | None = None
    resume: tuple[str, str] | None = None   # (when this path exists, add these arguments)
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    source: str | dict | None = None   # ship: the JSON to ship, or row name -> JSON
    to: str | None = None              # ship: where (default: the spec's result)
    files: dict[str, str] = field(default_factory=dict)  # ship: extra files, from -> to
    launcher: str = "python"
    lines: dict[str, int] = field(default_factory=dict)  # key -> line, for errors


@dataclass(frozen=True)
class Spec:
    path: Path
    name: str
    result: str
    stages: tuple[Stage, ...]
    vars: dict[str, str]
    seeds: dict[str, tuple[int, ...]]
    hash: str
    title: str = ""
    notes: str = ""
    after: dict[str, tuple[str, ...]] = field(default_factory=dict)  # spec -> its stages first
    lines: dict[str, int] = field(default_factory=dict)

    def where(self, line: int) -> str:
        return f"{self.path}:{line}"

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)


# ---------------------------------------------------------------- YAML with lines

class _Map(dict):
    """A YAML mapping that remembers the line of each key (1-based) and its own."""
    line = 0
    lines: dict


class _List(list):
    line = 0
    lines: list


def _located(node, construct):
    if isinstance(node, yaml.MappingNode):
        out = _Map()
        out.line, out.lines = node.start_mark.line + 1, {}
        for key_node, value_node in node.value:
            key = construct(key_node)
            out[key] = _located(value_node, construct)
            out.lines[key] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        out = _List(_located(n, construct) for n in node.value)
        out.line, out.lines = node.start_mark.line + 1, [n.start_mark.line + 1 for n in node.value]
        return out
    return construct(node)


def _read_yaml(path: Path) -> _Map:
    text = path.read_text()
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        raise SpecError(f"{path}:{line}: not valid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(node, yaml.MappingNode):
        raise SpecError(f"{path}:1: a spec is a mapping of {', '.join(SPEC_KEYS)}")
    constructor = yaml.constructor.SafeConstructor()
    return _located(node, lambda n: constructor.construct_object(n, deep=True))


# ---------------------------------------------------------------- the shape

def spec_hash(raw: dict) -> str:
    """sha256 of the spec's content without its prose (title, notes)."""
    kept = {k: v for k, v in raw.items() if k not in UNHASHED}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()


def _fail(path: Path, line: int, msg: str):
    raise SpecError(f"{path}:{line}: {msg}")


def _unknown_keys(path: Path, raw: _Map, known: tuple[str, ...], what: str) -> None:
    for key in raw:
        if key not in known:
            _fail(path, raw.lines[key], f"unknown key {key!r} in {what}; expected one of "
                                        f"{', '.join(known)}")


def _seeds(path: Path, raw, line: int) -> tuple[int, ...]:
    values = list(raw) if isinstance(raw, list) else [raw]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                             for v in values):
        _fail(path, line, f"seeds must be non-negative integers, got {raw!r}")
    return tuple(values)


def _strings(path: Path, raw, line: int, key: str) -> tuple[str, ...]:
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        _fail(path, line, f"{key} must be a path or a list of paths, got {raw!r}")
    return tuple(values)


def _variants(path: Path, raw, line: int) -> dict[str, dict]:
    if isinstance(raw, list) and all(isinstance(v, str) for v in raw):
        return {v: {} for v in raw}
    if isinstance(raw, dict) and all(isinstance(v, dict) or v is None for v in raw.values()):
        return {str(k): dict(v or {}) for k, v in raw.items()}
    _fail(path, line, f"variants must be a list of names or a mapping name -> "
                      f"{{key: value}}, got {raw!r}")


def _stage(path: Path, raw, seeds: dict, earlier: list[Stage]) -> Stage:
    if not isinstance(raw, _Map):
        _fail(path, getattr(raw, "line", 1), f"a stage is a mapping, got {raw!r}")
    _unknown_keys(path, raw, STAGE_KEYS, "a stage")
    at = lambda key: raw.lines.get(key, raw.line)  # noqa: E731
    name, kind = raw.get("name"), raw.get("kind")
    if not isinstance(name, str) or not name:
        _fail(path, raw.line, "a stage needs a name")
    if any(s.name == name for s in earlier):
        _fail(path, at("name"), f"a second stage named {name!r}")
    if kind not in KINDS:
        _fail(path, at("kind"), f"stage {name!r}: unknown kind {kind!r}; expected one of "
                                f"{', '.join(KINDS)}")
    if (kind == "ship") != ("run" not in raw):
        _fail(path, raw.line, f"stage {name!r}: " + ("a ship stage has `from`, not `run`"
                                                     if kind == "ship" else "needs `run`"))
    source = raw.get("from")
    if kind == "ship" and not (isinstance(source, str) or isinstance(source, dict) and source
                               and all(isinstance(v, str) for v in source.values())):
        _fail(path, raw.line, f"stage {name!r}: a ship stage needs `from`: the JSON to ship, or "
                              f"a mapping row name -> JSON (shipped as {{\"rows\": ...}})")
    stage_seeds = raw.get("seeds")
    if isinstance(stage_seeds, str):
        if stage_seeds not in seeds:
            _fail(path, at("seeds"), f"stage {name!r}: no seed role {stage_seeds!r}; the "
                                     f"spec's seeds are {sorted(seeds)}")
        stage_seeds = seeds[stage_seeds]
    elif stage_seeds is not None:
        stage_seeds = _seeds(path, stage_seeds, at("seeds"))
    names = {s.name for s in earlier}
    over = raw.get("over")
    if over is not None and over not in names:
        _fail(path, at("over"), f"stage {name!r}: over {over!r} is not an earlier stage")
    if over is not None and ("variants" in raw or "seeds" in raw):
        _fail(path, at("over"), f"stage {name!r}: `over` takes its jobs from {over!r}; "
                                f"drop variants and seeds")
    each = {}
    for var, item in (raw.get("each") or {}).items():
        if not (isinstance(item, dict) and set(item) == {"over", "item"}):
            _fail(path, at("each"), f"stage {name!r}: each.{var} needs `over` and `item`")
        if item["over"] not in names:
            _fail(path, at("each"), f"stage {name!r}: each.{var} is over {item['over']!r}, "
                                    f"not an earlier stage")
        each[var] = (item["over"], item["item"])
    resume = raw.get("resume")
    if resume is not None and not (isinstance(resume, dict) and set(resume) == {"when", "add"}):
        _fail(path, at("resume"), f"stage {name!r}: resume needs `when` (a path) and `add` "
                                  f"(arguments)")
    threads = raw.get("threads")
    if threads is not None and not (isinstance(threads, int) and threads >= 1):
        _fail(path, at("threads"), f"stage {name!r}: threads must be an integer >= 1, "
                                   f"got {threads!r}")
    launcher = raw.get("launcher", "python")
    if launcher not in LAUNCHERS:
        _fail(path, at("launcher"), f"stage {name!r}: launcher must be one of {LAUNCHERS}, "
                                    f"got {launcher!r}")
    return Stage(
        name=name, kind=kind, line=raw.line, run=raw.get("run"),
        variants=_variants(path, raw["variants"], at("variants")) if "variants" in raw else {},
        seeds=stage_seeds, over=over, each=each, threads=threads,
        resume=(resume["when"], str(resume["add"])) if resume else None,
        inputs=_strings(path, raw.get("inputs", []), at("inputs"), "inputs"),
        outputs=_strings(path, raw.get("outputs", []), at("outputs"), "outputs"),
        source=dict(source) if isinstance(source, dict) else source, to=raw.get("to"),
        files=dict(raw.get("files") or {}),
        launcher=launcher, lines=dict(raw.lines))


def load_spec(path) -> Spec:
    """Read and shape-check a spec; a SpecError names the file and line of what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no experiment spec at {path}")
    raw = _read_yaml(path)
    _unknown_keys(path, raw, SPEC_KEYS, "the spec")
    for key in ("name", "result", "stages"):
        if key not in raw:
            _fail(path, raw.line, f"the spec needs `{key}`")
    if raw["name"] != path.stem:
        _fail(path, raw.lines["name"], f"name {raw['name']!r} must be the file's stem "
                                       f"{path.stem!r}")
    seeds_raw = raw.get("seeds") or {}
    if not isinstance(seeds_raw, dict):
        _fail(path, raw.lines.get("seeds", 1), "seeds is a mapping role -> seed(s)")
    seeds = {role: _seeds(path, v, seeds_raw.lines[role]) for role, v in seeds_raw.items()}
    vars_ = {str(k): str(v) for k, v in (raw.get("vars") or {}).items()}
    if not isinstance(raw["stages"], list) or not raw["stages"]:
        _fail(path, raw.lines["stages"], "stages is a non-empty list")
    after = raw.get("after") or {}
    if not (isinstance(after, dict) and all(isinstance(v, list) and v and all(
            isinstance(x, str) for x in v) for v in after.values())):
        _fail(path, raw.lines.get("after", 1), "after is a mapping spec name -> [its stages "
                                               "that run first]")
    stages: list[Stage] = []
    for item in raw["stages"]:
        stages.append(_stage(path, item, seeds, stages))
    return Spec(path=path, name=raw["name"], result=str(raw["result"]), stages=tuple(stages),
                vars=vars_, seeds=seeds, hash=spec_hash(raw), title=str(raw.get("title", "")),
                notes=str(raw.get("notes", "")),
                after={k: tuple(v) for k, v in after.items()}, lines=dict(raw.lines))
