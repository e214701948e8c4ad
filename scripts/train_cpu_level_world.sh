#!/usr/bin/env bash
# The level world data/checkpoints/doom64_teacher (the default world doom64 is its 4-step
# student, scripts/train_students.sh): the wave-1 world (doom64_v1, trained
# on walks from MAP01's player start) fine-tuned on the whole level, on this repository's
# 2-core CPU, in stages that each resume where they stopped:
#   1. record 1,800 episodes from random starts over MAP01-03 (600 per map), monsters on,
#      player invulnerable                                                       (~7 min)
#   2. the autoencoder's decoder, 200 steps of 16 frames against a patch critic, encoder
#      frozen so the world model's latents stay as they were; the same run without the
#      critic, and the whole autoencoder at 8x and at 4x compression, are the comparison
#      rows of data/results/autoencoders.json                            (~25-40 min each)
#   3. the world model, 800 steps from doom64_v1's weights on 900 of those episodes (all
#      600 of MAP01, 150 each of MAP02-03), latents of the frozen encoder   (~60-80 min)
#   4. package, then score old against new (scripts/compare_worlds.py)
#   bash scripts/train_cpu_level_world.sh
# Minutes are on 2 shared cores (stages 2 and 3 ran side by side).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/level_world_recipe.sh
PY=${PY:-.venv/bin/python}
RUN=${RUN:-runs/w2}
OLD=data/checkpoints/doom64_v1

[ -f "$RUN/data/index.json" ] || $PY -m worldlab data record --engine doom --episodes 1800 \
    --frames 64 --size 64 --workers 2 --policy mix --event-rate 0.02 \
    --maps MAP01,MAP02,MAP03 --start random --monsters invulnerable --seed 0 \
    --no-metric-depth --out "$RUN/data"

# 900 of them for the world model: MAP01's 600 and the first 150 of MAP02 and MAP03
[ -f "$RUN/data900/index.json" ] || $PY -m worldlab data subset --store "$RUN/data" \
    --out "$RUN/data900" --per-map MAP01=600,MAP02=150,MAP03=150

for v in plain critic; do  # decoder only; --init with --resume starts or continues
  extra=()
  [ "$v" = critic ] && extra=(--set autoencoder__disc_weight=0.5 --set autoencoder__disc_start=50)
  [ -d "$RUN/ae_$v/model" ] || OMP_NUM_THREADS=1 $PY -m worldlab train autoencoder \
      --preset small --data "$RUN/data" --out "$RUN/ae_$v" --init "$OLD/autoencoder" --resume \
      --steps 200 --batch-size 16 --device cpu --set autoencoder__lr=2e-4 \
      --set autoencoder__train_encoder=False "${extra[@]}"
done

for v in 8x 4x; do  # compression: whole autoencoder (encoder too), 8x vs 4x from the same
  extra=()        # weights (the 4x one without the 8x one's lowest level), no critic
  [ "$v" = 4x ] && extra=(--set "autoencoder__block_out_channels=(32,64,128)")
  [ -d "$RUN/ae_full$v/model" ] || OMP_NUM_THREADS=1 $PY -m worldlab train autoencoder \
      --preset small --data "$RUN/data" --out "$RUN/ae_full$v" --init "$OLD/autoencoder" \
      --resume --steps 200 --batch-size 16 --device cpu --set autoencoder__lr=2e-4 "${extra[@]}"
done

if [ ! -d "$RUN/world/checkpoints/step_00000800" ]; then
  START=(--init "$OLD/world")
  [ -d "$RUN/world/checkpoints" ] && START=(--resume)
  $PY -m worldlab train world "${LEVEL_WORLD[@]}" \
      --data "$RUN/data900" --latents "$RUN/data/latents" --autoencoder "$OLD/autoencoder" \
      --captions "$OLD/captions.safetensors" --set train__checkpoint_every=100 \
      --out "$RUN/world" "${START[@]}" --steps 800
fi

# shipped with the decoder fine-tuned without the critic (data/README.md says why); the same
# world with the critic's decoder is packaged beside it for the strip
$PY -m worldlab train package --autoencoder "$RUN/ae_plain/model" --world "$RUN/world" \
    --out "${PACKAGE:-data/checkpoints/doom64_teacher}"
$PY -m worldlab train package --autoencoder "$RUN/ae_critic/model" --world "$RUN/world" \
    --out "$RUN/pkg_critic"
# the wave-1 recipe's data (scripts/train_cpu_world.sh: 720 episodes from the player start),
# for its coverage row
[ -f "$RUN/old_data/index.json" ] || $PY -m worldlab data record --engine doom --episodes 720 \
    --frames 64 --size 64 --workers 2 --policy mix --event-rate 0.02 --seed 0 \
    --no-metric-depth --out "$RUN/old_data"
$PY scripts/compare_worlds.py --autoencoders \
    "doom64_v1=$OLD/autoencoder,doom64=$RUN/ae_plain/model,decoder_critic=$RUN/ae_critic/model,whole_8x=$RUN/ae_full8x/model,whole_4x=$RUN/ae_full4x/model" \
    --out data/results/autoencoders.json
$PY scripts/compare_worlds.py --old-data "$RUN/old_data" --new-data "$RUN/data900" \
    --strip-also "decoder_critic=$RUN/pkg_critic"
