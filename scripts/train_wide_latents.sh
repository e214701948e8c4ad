#!/usr/bin/env bash
# Twice the latent channels at 4x (16 instead of 8: 16x16x16 numbers for a 64x64x3 frame),
# against the same budget without them, on this repository's 2-core CPU, in stages that
# each resume where they stopped:
#   1. side by side, one thread each, both from scripts/train_4x_world.sh's 4x autoencoder
#      (runs/ae4x/plain), 1,500 more steps of 16 frames at lr 2e-4:
#      a. 8 channels (the control);
#      b. 16 channels (`with_more_latent_channels`: step 0 decodes as the 8-channel one)
#                                                                  (43-45 min each)
#   2. side by side, one thread each, for each: its latents of the 900 level-world episodes,
#      and doom64_teacher's transformer under a new tokeniser (train world
#      --init-transformer, patch 4), 800 steps of the level-world recipe (about 45 min each
#      alone; 73 min beside scripts/train_patch_critics.sh)
#   3. package each world with its autoencoder
#   bash scripts/train_wide_latents.sh      (then scripts/compare_worlds.py, see data/README.md)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/level_world_recipe.sh
PY=${PY:-.venv/bin/python}
RUN=${RUN:-runs/wide}
DATA=${DATA:-runs/w2}  # scripts/train_cpu_level_world.sh's stage 1
START=${START:-runs/ae4x/plain/model}  # scripts/train_4x_world.sh's stage 1
mkdir -p "$RUN"

autoencoder() {  # channels
  [ -d "$RUN/ch$1/model" ] || OMP_NUM_THREADS=1 $PY -m worldlab train autoencoder \
      --preset small --batch-size 16 --device cpu --resume \
      --set "autoencoder__block_out_channels=(32,64,128)" --set autoencoder__latent_channels=$1 \
      --data "$DATA/data" --out "$RUN/ch$1" --init "$START" --steps 1500 \
      --set autoencoder__lr=2e-4
}
world() { teacher_on_latents "$RUN/ch$1/model" "$RUN/latents$1" "$RUN/world$1" "$RUN/pkg$1"; }
both() {  # a stage for 8 and 16 channels side by side; fails if either does; logs append
  "$1" 8 >> "$RUN/$1_8.log" 2>&1 &
  local a=$!
  "$1" 16 >> "$RUN/$1_16.log" 2>&1 &
  local b=$!
  wait $a; wait $b
}
both autoencoder
both world
