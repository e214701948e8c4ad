"""What a plan checks against the package before any work: the command parses, its `--set`
keys are config fields, and its seeds are in the range of its role (training and recording
below `HELDOUT_SEED`, evaluation at or above it; validation walks never reported)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
from pathlib import Path

from .spec import Spec, SpecError, Stage

# the seed roles that choose (validation) and those that are reported: never the same walks;
# a role named after one of them ("report_recall": another protocol's reported walks) is one
HELD_OUT_ROLES = ("validation", "report", "test", "heldout")


def held_out_role(role: str) -> bool:
    """`role` is one of HELD_OUT_ROLES, or named after one ("report_<what>")."""
    return role in HELD_OUT_ROLES or role.startswith(tuple(r + "_" for r in HELD_OUT_ROLES))



def _heldout_seed() -> int:
    from ..evaluate.protocols import HELDOUT_SEED
    return HELDOUT_SEED


def _at(spec: Spec, stage: Stage, key: str = "run") -> str:
    return spec.where(stage.lines.get(key, stage.line))


def check_command(spec: Spec, stage: Stage, argv: tuple[str, ...], root: Path) -> None:
    """The command parses as `python -m worldlab ...` (or names a script that exists), and
    its `--set SECTION__FIELD=VALUE` keys are fields of the config."""
    from ..cli import COMMANDS, build_parser
    if not argv:
        raise SpecError(f"{_at(spec, stage)}: stage {stage.name!r}: an empty command")
    if argv[0].endswith(".py"):
        if not (root / argv[0]).is_file():
            raise SpecError(f"{_at(spec, stage)}: stage {stage.name!r}: no script {argv[0]}")
        return
    if argv[0] not in COMMANDS:
        raise SpecError(f"{_at(spec, stage)}: stage {stage.name!r}: unknown command "
                        f"{argv[0]!r}; expected one of {', '.join(COMMANDS)}")
    complaint = capture_parse(build_parser(argv[0]), argv)
    if complaint:
        raise SpecError(f"{_at(spec, stage)}: stage {stage.name!r}: `python -m worldlab "
                        f"{' '.join(argv[:2])}` refuses the command: {complaint}")
    _check_overrides(spec, stage, argv)


def _check_overrides(spec: Spec, stage: Stage, argv: tuple[str, ...]) -> None:
    from ..config import WorldConfig
    sections = {f.name: {g.name for g in dataclasses.fields(f.default_factory())}
                for f in dataclasses.fields(WorldConfig) if f.name != "preset"}
    for flag, value in zip(argv, argv[1:]):
        if flag != "--set":
            continue
        key = value.partition("=")[0]
        section, _, name = key.partition("__")
        if section not in sections or name not in sections[section]:
            known = (sorted(sections) if section not in sections
                     else sorted(sections[section]))
            raise SpecError(f"{_at(spec, stage)}: stage {stage.name!r}: --set {key}: the "
                            f"config has no such field; expected one of {known}")


def _int_after(argv: tuple[str, ...], flag: str) -> int | None:
    for a, b in zip(argv, argv[1:]):
        if a == flag:
            try:
                return int(b)
            except ValueError:
                return None
    return None


def check_seeds(spec: Spec, stage: Stage, argv: tuple[str, ...]) -> None:
    """Training and recording seeds (episode k of a recording uses seed + k) stay below
    `HELDOUT_SEED` unless they are a declared held-out role's walks; evaluation seeds start at
    or above it."""
    heldout = _heldout_seed()
    seed = _int_after(argv, "--seed")
    if seed is None:
        return
    held_roles = {s for role, seeds in spec.seeds.items() if held_out_role(role)
                  for s in seeds}
    if stage.kind == "evaluate" and seed < heldout:
        raise SpecError(f"{_at(spec, stage)}: stage {stage.name!r}: evaluation seed {seed} is "
                        f"below HELDOUT_SEED {heldout}: those are training walks")
    if stage.kind in ("record", "encode", "train") and seed not in held_roles:
        last = seed + (_int_after(argv, "--episodes") or 1) - 1
        if last >= heldout:
            raise SpecError(f"{_at(spec, stage)}: stage {stage.name!r}: seeds {seed}-{last} "
                            f"reach HELDOUT_SEED {heldout}: the held-out walks are never "
                            f"trained on")


def check_seed_roles(spec: Spec) -> None:
    """Training roles below `HELDOUT_SEED`, held-out roles at or above it, and no seed in two
    held-out roles (a walk that chose a variant is never a reported one)."""
    heldout = _heldout_seed()
    owner: dict[int, str] = {}
    for role, seeds in spec.seeds.items():
        line = spec.where(spec.lines.get("seeds", 1))
        for s in seeds:
            if held_out_role(role) and s < heldout:
                raise SpecError(f"{line}: seed role {role!r} holds {s}, below HELDOUT_SEED "
                                f"{heldout}: held-out walks start at {heldout}")
            if not held_out_role(role) and s >= heldout:
                raise SpecError(f"{line}: seed role {role!r} holds {s}, a held-out seed "
                                f"(>= {heldout}); training seeds stay below it")
            if held_out_role(role) and owner.setdefault(s, role) != role:
                raise SpecError(f"{line}: seed {s} is in both {owner[s]!r} and {role!r}: the "
                                f"walks that choose are never the reported ones")


def capture_parse(parser, argv) -> str | None:
    """The parser's complaint about argv, or None when it parses."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(list(argv))
        except SystemExit as e:
            if e.code:
                return err.getvalue().strip().splitlines()[-1] if err.getvalue() else "refused"
    return None
