"""A spec's plan: every stage expanded into jobs (variant x seed), each job's command line
filled in, and everything checked that can be checked before any work: commands the
`python -m worldlab` parser refuses, `--set` keys the config does not have, seeds in the
wrong range, inputs that nothing makes. Every error names the spec's file and line.

    for stage, jobs in plan(load_spec("experiments/memory.yaml"), root=Path(".")):
        for job in jobs:
            print(job.name, job.argv)
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from .spec import Spec, SpecError, Stage

TEMPLATE = re.compile(r"\{([A-Za-z_][\w.]*)\}")
TRAINING_KINDS = ("record", "encode", "train", "package")


@dataclass(frozen=True)
class Job:
    stage: str
    name: str
    argv: tuple[str, ...]          # after `python -m worldlab` (or the script's path)
    outputs: tuple[str, ...]
    inputs: tuple[str, ...]
    threads: int | None = None
    resume: tuple[str, tuple[str, ...]] | None = None  # (path, extra args when it exists)
    launcher: str = "python"
    seed_rank: int = 0             # the seed's place in its stage's seeds (`start_order`)

    @property
    def command(self) -> str:
        """The command line as a person would type it (what the stamp records)."""
        head = ("python" if self.is_script else "python -m worldlab")
        return " ".join([head, *map(shlex.quote, self.argv)])

    @property
    def is_script(self) -> bool:
        return bool(self.argv) and self.argv[0].endswith(".py")


def _fill(spec: Spec, text: str, values: dict, line: int, stage: str) -> str:
    def one(m):
        key = m.group(1)
        if key in values:
            return str(values[key])
        raise SpecError(f"{spec.where(line)}: stage {stage!r}: unknown name {{{key}}}; "
                        f"known here: {', '.join(sorted(values))}")
    return TEMPLATE.sub(one, text)


def base_values(spec: Spec) -> dict[str, str]:
    """The vars (each may name earlier vars) and the seed roles as `seeds.ROLE`."""
    values = {f"seeds.{role}": " ".join(map(str, s)) for role, s in spec.seeds.items()}
    for key, text in spec.vars.items():
        values[key] = _fill(spec, text, values, spec.lines.get("vars", 1), "vars")
    return values


def job_values(stage: Stage, jobs_of: dict[str, list[dict]]) -> list[dict]:
    """One dict of template values per job of `stage` (variant, seed, job, the variant's
    keys); a stage with neither variants, seeds nor `over` has one job named after it."""
    if stage.over:
        return [dict(v) for v in jobs_of[stage.over]]
    variants = stage.variants or {None: {}}
    seeds = stage.seeds or (None,)
    out = []
    for variant, keys in variants.items():
        for rank, seed in enumerate(seeds):
            if variant is None:
                job = stage.name if seed is None else f"seed{seed}"
            else:
                job = variant if not seed else f"{variant}_seed{seed}"
            out.append({**{k: str(v) for k, v in keys.items()},
                        **({"variant": variant} if variant is not None else {}),
                        **({"seed": seed,  # how a table names this seed's row of a variant
                            "seed_suffix": f"_seed{seed}" if seed else ""}
                           if seed is not None else {}), "job": job, "seed_rank": rank})
    return out


def plan(spec: Spec, root: Path) -> list[tuple[Stage, list[Job]]]:
    """Every stage with its jobs, checked; raises SpecError before anything runs."""
    base = base_values(spec)
    jobs_of: dict[str, list[dict]] = {}
    made = made_before(spec, root)   # outputs of earlier stages (and of `after`'s)
    out = []
    for stage in spec.stages:
        rows = job_values(stage, jobs_of)
        jobs_of[stage.name] = rows
        jobs = [_job(spec, stage, {**base, **row, **_each(spec, stage, base, jobs_of)})
                for row in rows]
        for job in jobs:
            _check_job(spec, stage, job, root, made)
        made.extend(o for job in jobs for o in job.outputs)
        out.append((stage, jobs))
    from .checks import check_seed_roles
    check_seed_roles(spec)
    return out


def made_before(spec: Spec, root: Path) -> list[str]:
    """The outputs of the stages `after` names in other specs (beside this one), which run
    before this spec's own."""
    from .spec import load_spec
    made = []
    for name, stage_names in spec.after.items():
        path = spec.path.parent / f"{name}.yaml"
        where = spec.where(spec.lines.get("after", 1))
        if not path.is_file():
            raise SpecError(f"{where}: after names {name!r}, but there is no {path}")
        stages = {s.name: jobs for s, jobs in plan(load_spec(path), root)}
        for stage in stage_names:
            if stage not in stages:
                raise SpecError(f"{where}: {name} has no stage {stage!r}; its stages are "
                                f"{list(stages)}")
            made.extend(o for job in stages[stage] for o in job.outputs)
    return made


def _each(spec: Spec, stage: Stage, base: dict, jobs_of: dict) -> dict:
    return {var: " ".join(_fill(spec, item, {**base, **row}, stage.lines.get("each",
                                                                             stage.line),
                                stage.name) for row in jobs_of[over])
            for var, (over, item) in stage.each.items()}


def _job(spec: Spec, stage: Stage, values: dict) -> Job:
    at = lambda key: stage.lines.get(key, stage.line)  # noqa: E731
    fill = lambda text, key: _fill(spec, text, values, at(key), stage.name)  # noqa: E731
    if stage.kind == "ship":
        source = ({str(k): fill(v, "from") for k, v in stage.source.items()}
                  if isinstance(stage.source, dict) else fill(stage.source, "from"))
        files = {fill(k, "files"): fill(v, "files") for k, v in stage.files.items()}
        target = fill(stage.to or spec.result, "to")
        sources = tuple(source.values()) if isinstance(source, dict) else (source,)
        return Job(stage.name, values["job"],  # the source travels as JSON (a path or rows)
                   ("ship", json.dumps(source), target, *_flat(files)),
                   outputs=(target, *files.values()), inputs=(*sources, *files))
    argv = tuple(shlex.split(fill(stage.run, "run")))
    resume = None
    if stage.resume:
        resume = (fill(stage.resume[0], "resume"), tuple(shlex.split(fill(stage.resume[1],
                                                                          "resume"))))
    return Job(stage.name, values["job"], argv,
               outputs=tuple(fill(o, "outputs") for o in stage.outputs),
               inputs=tuple(fill(i, "inputs") for i in stage.inputs),
               threads=stage.threads, resume=resume, launcher=stage.launcher,
               seed_rank=values.get("seed_rank", 0))


def start_order(jobs: list[Job]) -> list[Job]:
    """The order the runner starts a stage's jobs in: every variant's first seed before any
    variant's second (spec order within a rank), so a stage stopped part way already shows
    each variant once."""
    return sorted(jobs, key=lambda j: j.seed_rank)


def _flat(files: dict[str, str]) -> list[str]:
    return [x for pair in files.items() for x in pair]


def _check_job(spec: Spec, stage: Stage, job: Job, root: Path, made: list[str]) -> None:
    from .checks import check_command, check_seeds
    if stage.kind != "ship":
        argv = job.argv + (job.resume[1] if job.resume else ())
        check_command(spec, stage, argv, root)
        check_seeds(spec, stage, job.argv)
    for path in job.inputs:
        if not (_exists(root, path) or _made_by(path, made)):
            raise SpecError(f"{spec.where(stage.lines.get('inputs', stage.line))}: stage "
                            f"{stage.name!r}: input {path} neither exists nor is an output "
                            f"of an earlier stage")


def _exists(root: Path, path: str) -> bool:
    return (root / path).exists()


def _made_by(path: str, made: list[str]) -> bool:
    """An earlier output is this path, holds it, or lies inside it."""
    p = Path(path)
    return any(p == Path(o) or Path(o) in p.parents or p in Path(o).parents for o in made)
