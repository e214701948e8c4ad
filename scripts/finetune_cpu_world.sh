#!/usr/bin/env bash
# Stage 2 of the shipped doom64 world model: continue stage 1 (scripts/train_cpu_world.sh)
# on three times the episodes (720: the 240 of stage 1 plus 480 new seeds) with a warm
# restart of the cosine schedule, on this repository's 2-core CPU machine.
#   bash scripts/finetune_cpu_world.sh         # ~75 min on 2 idle cores
# Resumable: rerun the same command after an interruption (it continues from the newest
# checkpoint under $RUN/world).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
STAGE1=${STAGE1:-runs/cpu}
RUN=${RUN:-runs/cpu2}
STEPS=${STEPS:-10367}  # stage 1 ended at 5,367
[ -f "$RUN/data/index.json" ] || $PY -m worldlab data record --engine doom --episodes 720 \
    --frames 64 --size 64 --workers 2 --policy mix --event-rate 0.02 --seed 0 \
    --no-metric-depth --out "$RUN/data"
[ -d "$RUN/world/checkpoints" ] || { mkdir -p "$RUN" && cp -r "$STAGE1/world" "$RUN/world"; }
$PY -m worldlab train world --preset small --data "$RUN/data" --resume \
    --autoencoder data/checkpoints/doom64/autoencoder --out "$RUN/world" --steps "$STEPS" \
    --batch-size 32 --device cpu --captions data/checkpoints/doom64/captions.safetensors \
    --set model__patch_size=2 --set model__width=192 --set model__depth=4 \
    --set model__window_chunks=1 --set data__clip_chunks=2 --set train__forcing=teacher \
    --set train__ema_decay=0.995 --set train__lr=5e-4 --set train__warmup_steps=100 \
    --set train__checkpoint_every=250
$PY -m worldlab train package --autoencoder data/checkpoints/doom64/autoencoder \
    --world "$RUN/world" --out "${PACKAGE:-runs/cpu2/doom64}"
