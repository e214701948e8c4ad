#!/usr/bin/env bash
# The whole single-machine recipe of a DOOM world (freedoom2 MAP01, 64x64, `small` preset)
# from the player start: how the wave-1 world's autoencoder (data/checkpoints/doom64_v1) was
# made. Every stage is a `python -m worldlab` command; budgets are
# wall-clock minutes (each stage times its own steps to fit, see worldlab.train.steps_for_budget).
#
#   bash scripts/train_default.sh                      # defaults below
#   EPISODES=200 AE_MINUTES=60 WORLD_MINUTES=120 bash scripts/train_default.sh   # a CPU day
#
# doom64_v1's autoencoder was made with the defaults on one H200 GPU (see data/README.md);
# its world model on the CPU by scripts/train_cpu_world.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python}
RUN=${RUN:-runs/default}
DEST=${DEST:-$RUN/package}
WORKERS=${WORKERS:-$(nproc)}
EPISODES=${EPISODES:-1600}
AE_MINUTES=${AE_MINUTES:-2.0}
WORLD_MINUTES=${WORLD_MINUTES:-4.0}
CAPTIONS=${CAPTIONS:-}   # a caption table, for machines without the text model

stage() { echo "[train_default] $(date +%T) $*"; }

# a stage whose output exists is skipped, so an interrupted run resumes where it stopped
[ -f "$RUN/data/index.json" ] && [ "${RESUME:-0}" = 1 ] || {
stage "record $EPISODES DOOM episodes"
$PY -m worldlab data record --engine doom --episodes "$EPISODES" --frames 64 --size 64 \
    --workers "$WORKERS" --policy mix --event-rate 0.02 --seed 0 --no-metric-depth \
    --out "$RUN/data"; }

[ -d "$RUN/ae/model" ] && [ "${RESUME:-0}" = 1 ] || {
stage "autoencoder, $AE_MINUTES min"
$PY -m worldlab train autoencoder --preset small --data "$RUN/data" --out "$RUN/ae" \
    --minutes "$AE_MINUTES" --batch-size "${AE_BATCH:-128}" --device auto; }

stage "world model, $WORLD_MINUTES min"
$PY -m worldlab train world --preset small --data "$RUN/data" --autoencoder "$RUN/ae/model" \
    --out "$RUN/world" --minutes "$WORLD_MINUTES" --batch-size "${WORLD_BATCH:-64}" --device auto \
    ${CAPTIONS:+--captions "$CAPTIONS"}

stage "package into $DEST"
$PY -m worldlab train package --autoencoder "$RUN/ae/model" --world "$RUN/world" --out "$DEST"
stage "done"
