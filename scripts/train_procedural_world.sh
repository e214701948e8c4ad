#!/usr/bin/env bash
# The procedural default world data/checkpoints/proc64 and its peer baseline
# data/checkpoints/peer_proc64, by the recipe of the DOOM world (scripts/train_cpu_level_world.sh,
# then scripts/train_students.sh ode) on this repository's 2-core CPU, in stages that each
# resume where they stopped:
#   1. record 900 procedural episodes of 64 frames (one world per seed, seeds 0-899), random
#      starts, the same policy mix and event rate as the DOOM data               (~3 min)
#   2. side by side, one thread each:
#      a. the teacher world model, 800 steps from doom64_teacher's weights, on latents of
#         the shipped autoencoder's frozen encoder (the DOOM world's own)        (~70 min)
#      b. the decoder, 200 steps of 16 frames from doom64's, encoder frozen so the latents
#         stay as they were (~30 min); then the DIAMOND-style peer on the same 900 episodes
#         for the DOOM peer's budget (scripts/train_peer.sh, 45 min)
#   3. the teacher packaged (runs/proc/teacher), then its 4-step student by ODE distillation,
#      240 steps of 16 clips on 512 teacher pairs (~20 min), then the fast decoder for play,
#      2,726 steps (~11 min; both doom64's recipe, scripts/train_students.sh); packaged as
#      proc64
#   bash scripts/train_procedural_world.sh
# A smoke run of every stage at tiny size:
#   RUN=/tmp/proc EPISODES=4 WORLD_STEPS=2 AE_STEPS=2 STUDENT_STEPS=2 PAIRS=4 FAST_STEPS=2 \
#     MINUTES=0.2 DEST=/tmp/proc/pkg SHIP_TO=/tmp/proc/peer_pkg \
#     bash scripts/train_procedural_world.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/level_world_recipe.sh
PY=${PY:-.venv/bin/python}
RUN=${RUN:-runs/proc}
BASE=data/checkpoints/doom64_teacher   # the DOOM level world: the world model's start
AE=data/checkpoints/doom64/autoencoder  # its encoder (frozen) and the decoder's start
DEST=${DEST:-data/checkpoints/proc64}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
stage() { echo "[train_procedural_world] $(date +%T) $*"; }

[ -f "$RUN/data/index.json" ] || { stage "record"; $PY -m worldlab data record \
    --engine procedural --episodes "${EPISODES:-900}" --frames 64 --size 64 --workers 2 \
    --policy mix --event-rate 0.02 --start random --seed 0 --out "$RUN/data"; }

world() {
  local steps=${WORLD_STEPS:-800}
  [ -d "$RUN/world/checkpoints/step_$(printf %08d "$steps")" ] && return 0
  local start=(--init "$BASE/world")
  [ -d "$RUN/world/checkpoints" ] && start=(--resume)
  stage "teacher world model"
  $PY -m worldlab train world "${LEVEL_WORLD[@]}" \
      --data "$RUN/data" --autoencoder "$AE" --captions "$BASE/captions.safetensors" \
      --set train__checkpoint_every=100 --out "$RUN/world" "${start[@]}" --steps "$steps"
}

decoder() {
  [ -d "$RUN/ae/model" ] && return 0
  stage "decoder"
  $PY -m worldlab train autoencoder --preset small --data "$RUN/data" --out "$RUN/ae" \
      --init "$AE" --resume --steps "${AE_STEPS:-200}" --batch-size 16 --device cpu \
      --set autoencoder__lr=2e-4 --set autoencoder__train_encoder=False
}

peer() {
  [ -f "${SHIP_TO:-data/checkpoints/peer_proc64}/train_run.json" ] && return 0
  stage "peer"
  DATA="$RUN/data" OUT="$RUN/peer" SHIP_TO=${SHIP_TO:-data/checkpoints/peer_proc64} PY=$PY \
      bash scripts/train_peer.sh
}

student() {
  [ -d "$RUN/teacher" ] || $PY -m worldlab train package --autoencoder "$RUN/ae/model" \
      --world "$RUN/world" --out "$RUN/teacher"
  [ -f "$RUN/ode/distill_run.json" ] && return 0
  local resume=(); [ -d "$RUN/ode/checkpoints" ] && resume=(--resume)
  stage "4-step student"
  $PY -m worldlab train distill --teacher "$RUN/teacher" --recipe ode --data "$RUN/data" \
      --device cpu --batch-size 16 --steps "${STUDENT_STEPS:-240}" \
      --set distill__pairs="${PAIRS:-512}" --out "$RUN/ode" "${resume[@]}"
}

fast_decoder() {
  [ -d "$RUN/fast_decoder/model" ] && return 0
  local resume=(); [ -d "$RUN/fast_decoder/checkpoints" ] && resume=(--resume)
  stage "fast decoder"
  $PY -m worldlab train decoder --world "$RUN/teacher" --data "$RUN/data" \
      --latents "$RUN/data/latents" --steps "${FAST_STEPS:-2726}" --device cpu \
      --out "$RUN/fast_decoder" "${resume[@]}"
}

# the latent cache first, so the lanes do not both fill it
$PY - "$RUN/data" "$AE" <<'PY'
import sys
from worldlab.episodes.datasets import LatentCache
from worldlab.episodes.store import EpisodeStore
from worldlab.train.recipes import fill_latents
store = EpisodeStore(sys.argv[1])
print("encoded", fill_latents(store, LatentCache(store.root / "latents"), sys.argv[2], "cpu"))
PY

lanes=()
trap 'kill "${lanes[@]}" 2>/dev/null' EXIT
world > "$RUN/world.log" 2>&1 & lanes+=($!); lane_world=$!
decoder > "$RUN/decoder.log" 2>&1
peer > "$RUN/peer.log" 2>&1 & lanes+=($!); lane_peer=$!
wait "$lane_world"
student > "$RUN/student.log" 2>&1
fast_decoder > "$RUN/fast_decoder.log" 2>&1
wait "$lane_peer"
trap - EXIT

stage "package into $DEST"
$PY -m worldlab train package --autoencoder "$RUN/ae/model" --world "$RUN/ode" \
    --fast-decoder "$RUN/fast_decoder/model" --decoder fast --out "$DEST"
stage "done"
