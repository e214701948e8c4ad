#!/usr/bin/env bash
# The memory variants of data/results/memory.json (notebook 04). Every variant fine-tunes
# the level world (data/checkpoints/doom64_teacher) from its weights with the same budget:
# STEPS steps of batch 16 on the clips of the first EPISODES episodes of one store of
# 96-frame random-start walks (half of them revisits: the "mix" players); they differ only
# in their memory (worldlab/train/memory.py: VARIANTS). Each is packaged, then scored by
# `eval --suite revisit` with SAMPLE_STEPS Euler steps on held-out leave-and-return and
# asymmetric-return walks. Every stage resumes where it stopped.
#   bash scripts/train_memory.sh data                      # record + encode the store
#   bash scripts/train_memory.sh depth                     # the depth head ("own" depth)
#   bash scripts/train_memory.sh train VARIANT [SEED]      # one run (1 thread)
#   bash scripts/train_memory.sh package                   # every finished run
#   bash scripts/train_memory.sh validate [NAME...]        # 3 validation walks (choose here)
#   bash scripts/train_memory.sh report [NAME...]          # the reported walks
# DEVICE=cuda runs every stage on a GPU (default cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DEVICE=${DEVICE:-cpu}  # cuda on a GPU machine: every stage trains and scores there
RUN=${RUN:-runs/memory}
DATA=${DATA:-runs/mem/data}
TEACHER=${TEACHER:-data/checkpoints/doom64_teacher}
STEPS=${STEPS:-300}
EPISODES=${EPISODES:-300}
SAMPLE_STEPS=${SAMPLE_STEPS:-8}
DEPTH_HEAD=${DEPTH_HEAD:-$RUN/depth_head}  # the "own" 3D cache's (train depth-head)

data() {
  [ -f "$DATA/index.json" ] || $PY -m worldlab data record --preset small --episodes 600 \
    --frames 96 --size 64 --workers 2 --policy mix --event-rate 0.02 \
    --maps MAP01,MAP02,MAP03 --start random --monsters invulnerable --seed 300000 --out "$DATA"
  $PY -c "from worldlab.train.recipes import fill_latents; from worldlab.episodes import \
EpisodeStore, LatentCache; s = EpisodeStore('$DATA'); \
print(fill_latents(s, LatentCache(s.root / 'latents'), '$TEACHER/autoencoder', '$DEVICE'), 'encoded')"
}

depth() {
  [ -d "$DEPTH_HEAD/model" ] || OMP_NUM_THREADS=${THREADS:-1} $PY -m worldlab train depth-head \
    --data "$DATA" --out "$DEPTH_HEAD" --steps 800 --batch-size 64 --device "$DEVICE"
}

train() {  # variant [seed]
  local variant=$1 seed=${2:-0} name=$1
  [ "$seed" = 0 ] || name=${variant}_seed$seed
  local out=$RUN/runs/$name
  [ -d "$out/ema" ] && { echo "$name done"; return; }
  local resume=()
  [ -d "$out/checkpoints" ] && resume=(--resume)
  OMP_NUM_THREADS=${THREADS:-1} $PY -m worldlab train memory --start "$TEACHER" \
    --variant "$variant" --seed "$seed" --data "$DATA" --episodes "$EPISODES" \
    --steps "$STEPS" --batch-size 16 --device "$DEVICE" --depth-head "$DEPTH_HEAD/model" \
    --out "$out" "${resume[@]}"
}

package() {
  for run in "$RUN"/runs/*/; do
    local name; name=$(basename "$run")
    if [ -d "$run/ema" ] && [ ! -d "$RUN/worlds/$name" ]; then
      $PY -m worldlab train package --autoencoder "$TEACHER/autoencoder" --world "$run" \
        --depth-head "$DEPTH_HEAD/model" --out "$RUN/worlds/$name"
    fi
  done
}

VALIDATION_SEED=1000500  # protocols.HELDOUT_SEED + 500: never a reported walk

score() {  # out-dir seed walks [names...]: the given worlds, or every packaged one
  local out=$1 seed=$2 walks=$3; shift 3
  local models=()
  if [ $# -eq 0 ]; then set -- $(ls "$RUN/worlds"); fi
  for name in "$@"; do models+=(--model "$name=$RUN/worlds/$name"); done
  OMP_NUM_THREADS=${THREADS:-2} $PY -m worldlab eval --suite revisit "${models[@]}" \
    --episodes "$walks" --seed "$seed" --steps "$SAMPLE_STEPS" --threads "${THREADS:-2}" \
    --cost-chunks "${COST_CHUNKS:-100}" --device "$DEVICE" --out "$out"
}

case "${1:-}" in
  data) data ;;
  depth) depth ;;
  train) train "$2" "${3:-0}" ;;
  package) package ;;
  validate) shift; score "${OUT:-$RUN/validate}" "$VALIDATION_SEED" "${WALKS:-3}" "$@" ;;
  report) shift; score "${OUT:-$RUN/eval}" 1000000 "${WALKS:-8}" "$@" ;;
  *) echo "usage: $0 data | train VARIANT [SEED] | package | validate|report [NAME...]" >&2
     exit 2 ;;
esac
