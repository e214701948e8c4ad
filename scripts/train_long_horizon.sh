#!/usr/bin/env bash
# The long-horizon methods of data/results/long_horizon.json (notebook 05). Every method
# fine-tunes the level world (data/checkpoints/doom64_teacher) from its weights with the
# same budget: STEPS steps of batch 16 on the same clips (runs/w2, scripts/
# train_cpu_level_world.sh); they differ only in their switch (worldlab/train/
# long_horizon.py: METHODS, and FINETUNE for what they share).
# Each is packaged, then scored by `eval --suite long` with SAMPLE_STEPS Euler steps:
# first on a validation walk (seeds apart from the reported ones) that picks the best,
# then on the reported walks. Every stage resumes where it stopped.
#   bash scripts/train_long_horizon.sh train METHOD [SEED]   # one run (1 thread)
#   bash scripts/train_long_horizon.sh package               # every finished run
#   bash scripts/train_long_horizon.sh validate [NAME...]    # 1 validation walk
#   bash scripts/train_long_horizon.sh report [NAME...]      # the 2 reported walks
#   bash scripts/train_long_horizon.sh quick NAME            # its next-chunk cost (quick suite)
# DEVICE=cuda runs every stage on a GPU (default cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DEVICE=${DEVICE:-cpu}  # cuda on a GPU machine: every stage trains and scores there
RUN=${RUN:-runs/long}
TEACHER=${TEACHER:-data/checkpoints/doom64_teacher}
STEPS=${STEPS:-300}
SAMPLE_STEPS=${SAMPLE_STEPS:-8}
VALIDATION_SEED=1000500  # protocols.HELDOUT_SEED + 500: never a reported walk

train() {  # method [seed]
  local method=$1 seed=${2:-0} name=$1
  [ "$seed" = 0 ] || name=${method}_seed$seed
  local out=$RUN/runs/$name
  [ -d "$out/ema" ] && { echo "$name done"; return; }
  local resume=()
  [ -d "$out/checkpoints" ] && resume=(--resume)
  OMP_NUM_THREADS=${THREADS:-1} $PY -m worldlab train long-horizon --start "$TEACHER" \
    --method "$method" --seed "$seed" --data runs/w2/data900 --latents runs/w2/data/latents \
    --steps "$STEPS" --batch-size 16 --device "$DEVICE" --out "$out" "${resume[@]}"
}

package() {
  for run in "$RUN"/runs/*/; do
    local name; name=$(basename "$run")
    if [ -d "$run/ema" ] && [ ! -d "$RUN/worlds/$name" ]; then
      $PY -m worldlab train package --autoencoder "$TEACHER/autoencoder" --world "$run" \
        --out "$RUN/worlds/$name"
    fi
  done
}

score() {  # out-dir seed walks [names...]
  local out=$1 seed=$2 walks=$3; shift 3
  local models=()
  for name in "$@"; do models+=(--model "$name=$RUN/worlds/$name"); done
  OMP_NUM_THREADS=${THREADS:-2} $PY -m worldlab eval --suite long "${models[@]}" \
    --episodes "$walks" --frames 1000 --seed "$seed" --steps "$SAMPLE_STEPS" \
    --threads "${THREADS:-2}" --device "$DEVICE" --out "$out"
}

names() {  # the given names, or every packaged world
  if [ $# -gt 0 ]; then printf '%s\n' "$@"; else for w in "$RUN"/worlds/*/; do basename "$w"; done; fi
}

case "${1:-}" in
  train) train "$2" "${3:-0}" ;;
  package) package ;;
  validate) shift; mapfile -t n < <(names "$@"); score "$RUN/validate" "$VALIDATION_SEED" 1 "${n[@]}" ;;
  report) shift; mapfile -t n < <(names "$@"); score "$RUN/report" 1000000 2 "${n[@]}" ;;
  quick) OMP_NUM_THREADS=${THREADS:-2} $PY -m worldlab eval --suite quick \
      --checkpoint "$RUN/worlds/$2" --steps "$SAMPLE_STEPS" --threads "${THREADS:-2}" \
      --device "$DEVICE" --runtime-chunks 6 --out "$RUN/quick/$2" ;;
  *) echo "usage: $0 train METHOD [SEED] | package | validate [NAME...] | report [NAME...]" \
       "| quick NAME" >&2
     exit 2 ;;
esac
