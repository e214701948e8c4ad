#!/usr/bin/env bash
# data/results/distill.json: the shipped teacher and its students (scripts/train_students.sh,
# packaged with the fast decoder into runs/students/) side by side in one run, 2 threads.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${TEACHER:-data/checkpoints/doom64_teacher}
S=${STUDENTS:-runs/students}
.venv/bin/python -m worldlab bench distill --threads 2 --out runs/bench \
  --model "teacher_16=$T,steps=16" --model "teacher_32=$T,steps=32" --model "teacher_4=$T,steps=4" \
  --model "student_4_ode=$S/ode" --model "student_4_consistency=$S/consistency" \
  --model "student_4_dmd=$S/dmd" --model "student_4_dmd_clip=$S/dmd_clip" \
  --model "student_1=$S/student_1_ode" \
  --model "student_4_ode_fast_decoder=$S/ode,decoder=fast" \
  --model "student_1_fast_decoder=$S/student_1_ode,decoder=fast" \
  --model "student_4_ode_fast_decoder_int8=$S/ode,decoder=fast,quantize=int8"
.venv/bin/python scripts/ship_result.py runs/bench/distill.json data/results/distill.json \
  "bash scripts/train_students.sh && bash scripts/bench_students.sh"
