#!/usr/bin/env bash
# The prepared device run (issue 17): on one GPU, in one call of under 10 minutes (measured:
# data/results/gpu_run.json and docs/scaling.md), it records DOOM
# episodes (or reuses a store), encodes their latents with the shipped doom64 autoencoder,
# trains the `base` world model on them (64 px, a wall-clock budget), packages it, runs
# the quick suite on it (and, with COMPARE=1, on doom64; else doom64's shipped scores are
# the comparison), and benchmarks streaming (the trained world, and a fresh `base` world at
# 256 x 256, both with 4 sampling steps) and training (steps/s, data wait, torch.compile,
# fused attention). Everything lands in one folder to bring back:
#
#   OUT/summary.json      the numbers that matter, the machine, seconds per stage
#   OUT/stages.tsv        stage, seconds, command
#   OUT/checkpoint/       the packaged world (load_world reads it)
#   OUT/world/            the training run: model/, ema/, world_config.json, checkpoints
#   OUT/eval*/quick.json  OUT/bench/train.json  OUT/bench/model*/model.json
#
#   bash scripts/gpu_run.sh [--out DIR] [--data STORE]   # on the GPU
#   bash scripts/gpu_run.sh --dry-run [--out DIR]         # CPU, tiny sizes, ~2 minutes
#
# --dry-run runs every stage on the CPU with the `tiny` preset and a handful of episodes,
# so the script is known to work before device time is spent (tests/test_gpu_run.py).
# Before anything else the preset is checked against the device's memory and the accelerate
# config against the machine (`python -m worldlab train check`): a mismatch fails at once.
# Knobs (environment): EPISODES, WORLD_MINUTES, WORLD_BATCH, COMPARE, PY. Without open3d the
# eval walks use DOOM's coarse depth buffer (--no-metric-depth).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
command -v "$PY" >/dev/null || PY=python3
DRY=0 OUT=runs/gpu_run DATA=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --out) OUT=$2; shift ;;
    --data) DATA=$2; shift ;;
    *) echo "gpu_run.sh: unknown argument $1 (expected --dry-run, --out DIR, --data STORE)" >&2
       exit 2 ;;
  esac
  shift
done
AE=data/checkpoints/doom64/autoencoder
CAPTIONS=data/checkpoints/doom64/captions.safetensors
if [ "$DRY" = 1 ]; then
  DEVICE=cpu PRESET=tiny EPISODES=${EPISODES:-4} FRAMES=32 WORKERS=1 SIZE_256=64
  BUDGET=(--steps 4) SETS=(--set data__size=64)
  EVAL=(--episodes 1 --horizon 8 --starts 1 --runtime-chunks 6)
  CHECK=() COMPARE=0 MODEL_STEPS=12 TRAIN_STEPS=2 COMPILE=() THREADS=2
else
  DEVICE=cuda PRESET=base EPISODES=${EPISODES:-600} FRAMES=64 WORKERS=$(nproc) SIZE_256=256
  BUDGET=(--minutes "${WORLD_MINUTES:-2}")
  # 64 px clips are short (512 tokens): no need to trade compute for activation memory
  SETS=(--set data__size=64 --set train__batch_size="${WORLD_BATCH:-64}"
        --set train__grad_checkpointing=False)
  EVAL=(--episodes 8 --runtime-chunks 20)
  CHECK=(--accelerate-config configs/accelerate/one_gpu.yaml)
  # doom64's quick suite on this device too (COMPARE=1, ~45 s); else its shipped scores
  COMPARE=${COMPARE:-0} MODEL_STEPS=200 TRAIN_STEPS=60 COMPILE=(--compile) THREADS=8
fi
# Without open3d (a bare device image) the held-out walks take DOOM's coarse depth buffer
# instead of ray casting the level: the same frames, only warp-last's depth is coarser
if ! "$PY" -c "import open3d" 2>/dev/null; then
  echo "[gpu_run] open3d is missing: eval with --no-metric-depth (warp-last on coarse depth)"
  EVAL+=(--no-metric-depth)
fi
mkdir -p "$OUT"
: > "$OUT/stages.tsv"
START=$SECONDS

stage() {  # stage NAME COMMAND...: run it, log its seconds
  local name=$1 t0=$SECONDS
  shift
  echo "[gpu_run] $(date +%T) $name: $*"
  "$@"
  printf '%s\t%s\t%s\n' "$name" "$((SECONDS - t0))" "$*" >> "$OUT/stages.tsv"
}

stage check "$PY" -m worldlab train check --preset "$PRESET" "${SETS[@]}" --device "$DEVICE" \
  "${CHECK[@]}"
if [ -n "$DATA" ] && [ -f "$DATA/index.json" ]; then
  echo "[gpu_run] reusing the episodes of $DATA"
else
  DATA=$OUT/data
  [ -f "$DATA/index.json" ] || stage record "$PY" -m worldlab data record --engine doom \
    --episodes "$EPISODES" --frames "$FRAMES" --size 64 --workers "$WORKERS" --policy mix \
    --event-rate 0.02 --seed 0 --no-metric-depth --out "$DATA"
fi
# latents of the shipped autoencoder, kept with this run: a reused store's own latents may
# come from another autoencoder
stage world "$PY" -m worldlab train world --preset "$PRESET" "${SETS[@]}" --data "$DATA" \
  --latents "$OUT/latents" --autoencoder "$AE" --captions "$CAPTIONS" --out "$OUT/world" \
  --device "$DEVICE" "${BUDGET[@]}"
stage package "$PY" -m worldlab train package --autoencoder "$AE" --world "$OUT/world" \
  --out "$OUT/checkpoint"
stage eval "$PY" -m worldlab eval --suite quick --checkpoint "$OUT/checkpoint" \
  --device "$DEVICE" --threads "$THREADS" --out "$OUT/eval" "${EVAL[@]}"
if [ "$COMPARE" = 1 ]; then
  stage eval_doom64 "$PY" -m worldlab eval --suite quick --checkpoint data/checkpoints/doom64 \
    --device "$DEVICE" --threads "$THREADS" --out "$OUT/eval_doom64" "${EVAL[@]}"
fi
stage bench_model "$PY" -m worldlab bench model --checkpoint "$OUT/checkpoint" \
  --sample-steps 4 --steps "$MODEL_STEPS" --device "$DEVICE" --threads "$THREADS" \
  --out "$OUT/bench/model"
stage bench_model_256 "$PY" -m worldlab bench model --preset "$PRESET" --size "$SIZE_256" \
  --sample-steps 4 --steps "$MODEL_STEPS" --device "$DEVICE" --threads "$THREADS" \
  --out "$OUT/bench/model_256"
stage bench_train "$PY" -m worldlab bench train --preset "$PRESET" "${SETS[@]}" \
  --data "$DATA" --latents "$OUT/latents" --episodes 64 --steps "$TRAIN_STEPS" \
  --device "$DEVICE" --threads "$THREADS" "${COMPILE[@]}" --out "$OUT/bench"
"$PY" scripts/gpu_run_summary.py "$OUT" --seconds "$((SECONDS - START))"
