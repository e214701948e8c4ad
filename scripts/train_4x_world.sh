#!/usr/bin/env bash
# A 4x autoencoder trained long, and the level world (doom64_teacher) moved onto its
# latents, on this repository's 2-core CPU, in stages that each resume where they stopped:
#   1. the whole autoencoder at 4x compression (doom64_v1's weights minus the lowest level),
#      3,000 steps of 16 frames, lr 5e-4, on the 1,800 random-start episodes of
#      scripts/train_cpu_level_world.sh (15x the steps of autoencoders.json's whole_4x row)
#                                                            (~50 min, 2 threads)
#   2. side by side, one thread each:
#      a. its decoder alone against the patch critic (weights 0.5 and 0.1), 500 steps each,
#         encoder frozen so the latents stay those of stage 1            (~20 min each)
#      b. doom64_teacher's transformer under a new tokeniser (train world
#         --init-transformer, patch 4: the same 4x4 token grid as 8x latents at patch 2),
#         800 steps of the level-world recipe on the 900 episodes it was trained on
#                                                                        (~35 min)
#   3. package the world with the stage-1 autoencoder
#   bash scripts/train_4x_world.sh      (then scripts/compare_worlds.py, see data/README.md)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/level_world_recipe.sh
source scripts/autoencoder_recipe.sh
PY=${PY:-.venv/bin/python}
RUN=${RUN:-runs/ae4x}
DATA=${DATA:-runs/w2}  # scripts/train_cpu_level_world.sh's stage 1
OLD=data/checkpoints/doom64_v1
AE4X=(--preset small --batch-size 16 --device cpu --resume
      --set "autoencoder__block_out_channels=(32,64,128)")

[ -d "$RUN/plain/model" ] || OMP_NUM_THREADS=2 $PY -m worldlab train autoencoder "${AE4X[@]}" \
    --data "$DATA/data" --out "$RUN/plain" --init "$OLD/autoencoder" --steps 3000 \
    --set autoencoder__lr=5e-4

critics() {
  for w in 0.5 0.1; do
    fine_tune_autoencoder "$RUN/plain/model" "$RUN/critic$w" False \
        --set autoencoder__disc_weight=$w --set autoencoder__disc_start=100
  done
}
world() { teacher_on_latents "$RUN/plain/model" "$RUN/latents900" "$RUN/world" "$RUN/pkg"; }
critics >> "$RUN/critics.log" 2>&1 &
a=$!
world >> "$RUN/world.log" 2>&1 &
b=$!
wait $a; wait $b  # either failing fails the script (set -e)
