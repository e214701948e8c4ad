#!/usr/bin/env bash
# A longer fine-tune of the DOOM level world on all of its data, on this repository's 2-core
# CPU, in stages that each resume where they stopped:
#   1. latents of the 1,800 random-start episodes over MAP01-03 (scripts/train_cpu_level_world.sh
#      records them into runs/w2/data), with doom64's frozen encoder
#   2. the world model, WORLD_STEPS (1,600) steps from doom64_teacher's weights on all 1,800
#      episodes (doom64_teacher saw 900 of them for 800 steps), one thread     (~55 min)
#   3. package the teacher, then its 4-step ODE student (240 steps on 512 pairs, as
#      scripts/train_students.sh) with doom64's fast decoder (the autoencoder is unchanged)
#   bash scripts/train_level_world_long.sh
# then score the teacher against doom64_teacher (data/results/world_longer_finetune.json):
#   python scripts/compare_worlds.py --old data/checkpoints/doom64_teacher --new runs/w3/teacher \
#       --parts world --out data/results/world_longer_finetune.json --what "..."
# Measured on 2026-12-01: it does not beat doom64_teacher, so it is not shipped (data/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/level_world_recipe.sh
PY=${PY:-.venv/bin/python}
DATA=${DATA:-runs/w2/data}
RUN=${RUN:-runs/w3}
BASE=data/checkpoints/doom64_teacher
export OMP_NUM_THREADS=${THREADS:-1} MKL_NUM_THREADS=${THREADS:-1}
stage() { echo "[train_level_world_long] $(date +%T) $*"; }

[ -f "$DATA/index.json" ] || { echo "no store at $DATA: run scripts/train_cpu_level_world.sh's record stage" >&2; exit 2; }
stage "latents"
$PY - "$DATA" "$BASE/autoencoder" <<'PY'
import sys
from worldlab.episodes.datasets import LatentCache
from worldlab.episodes.store import EpisodeStore
from worldlab.train.recipes import fill_latents
store = EpisodeStore(sys.argv[1])
print("encoded", fill_latents(store, LatentCache(store.root / "latents"), sys.argv[2], "cpu"))
PY

steps=${WORLD_STEPS:-1600}
if [ ! -d "$RUN/world/checkpoints/step_$(printf %08d "$steps")" ]; then
  start=(--init "$BASE/world")
  [ -d "$RUN/world/checkpoints" ] && start=(--resume)
  stage "world model, $steps steps"
  $PY -m worldlab train world "${LEVEL_WORLD[@]}" \
      --data "$DATA" --latents "$DATA/latents" --autoencoder "$BASE/autoencoder" \
      --captions "$BASE/captions.safetensors" --set train__checkpoint_every=200 \
      --out "$RUN/world" "${start[@]}" --steps "$steps"
fi

[ -d "$RUN/teacher" ] || $PY -m worldlab train package --autoencoder "$BASE/autoencoder" \
    --world "$RUN/world" --out "$RUN/teacher"
if [ ! -f "$RUN/ode/distill_run.json" ]; then
  resume=(); [ -d "$RUN/ode/checkpoints" ] && resume=(--resume)
  stage "4-step student"
  $PY -m worldlab train distill --teacher "$RUN/teacher" --recipe ode --data "$DATA" \
      --device cpu --batch-size 16 --steps "${STUDENT_STEPS:-240}" \
      --set distill__pairs="${PAIRS:-512}" --out "$RUN/ode" "${resume[@]}"
fi
[ -d "$RUN/student" ] || $PY -m worldlab train package --autoencoder "$BASE/autoencoder" \
    --world "$RUN/ode" --fast-decoder data/checkpoints/doom64/fast_decoder --decoder fast \
    --out "$RUN/student"
stage "done"
