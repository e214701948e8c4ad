#!/usr/bin/env bash
# The world model of data/checkpoints/doom64_v1 (the wave-1 default world), trained on this repository's 2-core
# CPU on top of the GPU-trained autoencoder (data/README.md says why), in three stages:
#   1. 5,367 steps on 240 episodes, one-chunk context                       (~58 min)
#   2. on to step 10,367 on 720 episodes (the 240 + 480 new seeds), the cosine
#      schedule restarted warm by the longer run                              (~72 min)
#   3. 1,100 steps from stage 2's EMA weights with a three-chunk context (clips of 4
#      chunks), so late in a rollout the model still sees where it came from  (~19 min)
#   bash scripts/train_cpu_world.sh
# A finished stage is skipped; rerun after an interruption and a stage resumes from its
# newest checkpoint. Minutes are on 2 idle cores. (Stage 1 was first run as `--minutes 50`,
# which timed out at 5,367 steps; the count is fixed here so the run is repeatable.)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
S1=${S1:-runs/cpu} S2=${S2:-runs/cpu2} S3=${S3:-runs/cpu3}
AE=data/checkpoints/doom64_v1/autoencoder
COMMON=(--preset small --batch-size 32 --device cpu --autoencoder "$AE"
        --captions data/checkpoints/doom64_v1/captions.safetensors
        --set model__patch_size=2 --set model__width=192 --set model__depth=4
        --set train__forcing=teacher --set train__ema_decay=0.995)
record() {  # record N_EPISODES OUT
  [ -f "$2/index.json" ] || $PY -m worldlab data record --engine doom --episodes "$1" \
      --frames 64 --size 64 --workers 2 --policy mix --event-rate 0.02 --seed 0 \
      --no-metric-depth --out "$2"
}

done_at() { [ -d "$1/checkpoints/step_$(printf %08d "$2")" ]; }  # done_at RUN STEP

record 240 "$S1/data"
done_at "$S1/world" 5367 || $PY -m worldlab train world "${COMMON[@]}" \
    --data "$S1/data" --out "$S1/world" --resume --steps 5367 \
    --set model__window_chunks=1 --set data__clip_chunks=2 --set train__lr=5e-4 \
    --set train__warmup_steps=100 --set train__checkpoint_every=250

record 720 "$S2/data"  # seeds 0-239 are stage 1's episodes again (recording is seeded)
if ! done_at "$S2/world" 10367; then
  [ -d "$S2/world/checkpoints" ] || { mkdir -p "$S2" && cp -r "$S1/world" "$S2/world"; }
  $PY -m worldlab train world "${COMMON[@]}" --data "$S2/data" --out "$S2/world" --resume \
      --steps 10367 --set model__window_chunks=1 --set data__clip_chunks=2 \
      --set train__lr=5e-4 --set train__warmup_steps=100 --set train__checkpoint_every=250
fi

if ! done_at "$S3/world" 1100; then
  START=(--init "$S2/world/ema")
  [ -d "$S3/world/checkpoints" ] && START=(--resume)
  $PY -m worldlab train world "${COMMON[@]}" --data "$S2/data" --out "$S3/world" \
      "${START[@]}" --steps 1100 --set model__window_chunks=3 --set data__clip_chunks=4 \
      --set train__lr=1.5e-4 --set train__warmup_steps=50 --set train__checkpoint_every=200 \
      --set sample__steps=16  # chosen on validation seeds 2,000,000+ (data/README.md)
fi
$PY -m worldlab train package --autoencoder "$AE" --world "$S3/world" \
    --out "${PACKAGE:-data/checkpoints/doom64_v1}"
