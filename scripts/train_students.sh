#!/usr/bin/env bash
# The students of the shipped teacher for data/results/distill.json (notebook 06): the same
# clips, the teacher's weights as every student's start, batch 16, steps set so each recipe
# costs about the same CPU time (measured per step on this 2-core machine: ode 2.4 s plus its
# pairs, consistency 4 s, dmd 9.5 s, dmd_clip 21 s), then the fast decoder, then each student
# packaged with it under runs/students/. Each stage is resumable: run it again after a stop.
#   bash scripts/train_students.sh            # everything, in order
#   bash scripts/train_students.sh dmd        # one stage: ode consistency dmd dmd_clip one
#                                             #            decoder package dmd_from_ode
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-runs/distill}
TEACHER=${TEACHER:-data/checkpoints/doom64_teacher}
DATA=(--data runs/w2/data900 --latents runs/w2/data/latents)  # scripts/train_cpu_level_world.sh
train() {  # name recipe steps [extra args]
  local name=$1 recipe=$2 steps=$3; shift 3
  local resume=(); [ -d "$RUN/$name/checkpoints" ] && resume=(--resume)
  [ -f "$RUN/$name/distill_run.json" ] && { echo "$name done"; return; }
  OMP_NUM_THREADS=${THREADS:-1} .venv/bin/python -m worldlab train distill --teacher "$TEACHER" \
    --recipe "$recipe" "${DATA[@]}" --device cpu \
    --batch-size 16 --steps "$steps" --out "$RUN/$name" "${resume[@]}" "$@"
}
stage() {
  case "$1" in
    ode) train ode ode 240 --set distill__pairs=512 ;;
    consistency) train consistency consistency 150 ;;
    dmd) train dmd dmd 60 ;;
    dmd_clip) train dmd_clip dmd_clip 28 ;;
    one) train student_1_ode ode 240 --student-steps 1 --set distill__pairs=512 ;;
    dmd_from_ode) train dmd_from_ode dmd 60 --student-init "$RUN/ode/ema" ;;  # Self-Forcing's order
    decoder) [ -d runs/fast_decoder/model ] || OMP_NUM_THREADS=1 .venv/bin/python -m worldlab \
        train decoder --world "$TEACHER" "${DATA[@]}" --out runs/fast_decoder --minutes 11 \
        --device cpu ;;
    package) for r in ode consistency dmd dmd_clip student_1_ode dmd_from_ode; do
        [ -d "$RUN/$r" ] || continue
        [ -d "runs/students/$r" ] || .venv/bin/python -m worldlab train package \
          --autoencoder "$TEACHER/autoencoder" --world "$RUN/$r" --out "runs/students/$r" \
          --fast-decoder runs/fast_decoder/model
      done ;;
    *) echo "unknown stage $1" >&2; exit 2 ;;
  esac
}
if [ $# -eq 0 ]; then
  for s in ode consistency dmd dmd_clip one decoder package; do stage "$s"; done
else
  stage "$1"
fi
