#!/usr/bin/env bash
# data/results/distill_dmd_from_ode.json: DMD started from the ode student (Self-Forcing's
# order: `bash scripts/train_students.sh dmd_from_ode`, 60 steps, then `package`) beside the
# teacher and the ode student, in one run, 2 threads.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${TEACHER:-data/checkpoints/doom64_teacher}
S=${STUDENTS:-runs/students}
.venv/bin/python -m worldlab bench distill --threads 2 --out runs/bench_dmd_from_ode \
  --model "teacher_16=$T,steps=16" --model "student_4_ode=$S/ode" \
  --model "student_4_dmd_from_ode=$S/dmd_from_ode"
.venv/bin/python - <<'PY'
import json, subprocess
from datetime import date
from worldlab.atomic import atomic_write_json
from worldlab.paths import ROOT
data = json.loads((ROOT / "runs" / "bench_dmd_from_ode" / "distill.json").read_text())
git = lambda *a: subprocess.run(["git", *a], cwd=ROOT, text=True,  # noqa: E731
                                capture_output=True).stdout.strip()
dirty = git("status", "--porcelain", "--untracked-files=no")
data.update(command="bash scripts/train_students.sh dmd_from_ode && bash scripts/"
                    "train_students.sh package && bash scripts/bench_dmd_from_ode.sh",
            commit=git("rev-parse", "--short", "HEAD") + (" with uncommitted changes"
                                                            if dirty else ""),
            measured=str(date.today()))
print("wrote", atomic_write_json(ROOT / "data" / "results" / "distill_dmd_from_ode.json", data))
PY
