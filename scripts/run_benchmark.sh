#!/usr/bin/env bash
# The shipped benchmark (data/results/benchmark.json, notebook 08): `eval --suite full` on both
# shipped worlds, doom64 and proc64, each with its engine's shipped probes
# (data/checkpoints/probes/<engine>, `train probes`) and its peer (data/checkpoints/peer_<world>,
# scripts/train_peer.sh and scripts/train_procedural_world.sh), at the suite's default sizes,
# on 2 CPU threads; then the JSON and the frame strips go to data/results/ with the command
# and commit that made them.
#   bash scripts/run_benchmark.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-runs/eval/benchmark}
ARGS=(--suite full --model doom64=data/checkpoints/doom64 --model proc64=data/checkpoints/proc64
      --threads 2 --out "$OUT")
$PY -m worldlab eval "${ARGS[@]}"
$PY scripts/ship_result.py "$OUT/full.json" data/results/benchmark.json \
    "python -m worldlab eval ${ARGS[*]}"
for world in doom64 proc64; do
  for where in main generalisation; do
    cp "$OUT/full_strip_${world}_$where.png" "data/results/benchmark_strip_${world}_$where.png"
  done
done
