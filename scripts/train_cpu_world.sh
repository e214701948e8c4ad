#!/usr/bin/env bash
# The world model of data/checkpoints/doom64 as shipped: trained on this repository's 2-core
# CPU machine on top of the GPU-trained autoencoder (see data/README.md for why).
#   bash scripts/train_cpu_world.sh            # ~1 hour on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
RUN=${RUN:-runs/cpu}
MINUTES=${MINUTES:-50}
[ -f "$RUN/data/index.json" ] || $PY -m worldlab data record --engine doom --episodes 240 \
    --frames 64 --size 64 --workers 2 --policy mix --event-rate 0.02 --seed 0 \
    --no-metric-depth --out "$RUN/data"
$PY -m worldlab train world --preset small --data "$RUN/data" \
    --autoencoder data/checkpoints/doom64/autoencoder --out "$RUN/world" --minutes "$MINUTES" \
    --batch-size 32 --device cpu --captions data/checkpoints/doom64/captions.safetensors \
    --set model__patch_size=2 --set model__width=192 --set model__depth=4 \
    --set model__window_chunks=1 --set data__clip_chunks=2 --set train__forcing=teacher \
    --set train__ema_decay=0.995 --set train__lr=5e-4 --set train__warmup_steps=100 \
    --set train__checkpoint_every=250
$PY -m worldlab train package --autoencoder data/checkpoints/doom64/autoencoder \
    --world "$RUN/world" --out data/checkpoints/doom64
