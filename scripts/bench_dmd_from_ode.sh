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
.venv/bin/python scripts/ship_result.py runs/bench_dmd_from_ode/distill.json \
  data/results/distill_dmd_from_ode.json "bash scripts/train_students.sh dmd_from_ode && \
bash scripts/train_students.sh package && bash scripts/bench_dmd_from_ode.sh"
