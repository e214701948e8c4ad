#!/usr/bin/env bash
# The shipped benchmark (data/results/benchmark.json, notebook 08): `eval --suite full` on the
# shipped world with its shipped probes (data/checkpoints/probes/doom, `train probes`) and
# peer (data/checkpoints/peer_doom64, scripts/train_peer.sh), at the suite's default sizes,
# on 2 CPU threads; then the JSON and the frame strips go to data/results/ with the command
# and commit that made them.
#   bash scripts/run_benchmark.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-runs/eval/benchmark}
CMD="python -m worldlab eval --suite full --checkpoint data/checkpoints/doom64 --threads 2 --out $OUT"
$PY -m worldlab eval --suite full --checkpoint data/checkpoints/doom64 --threads 2 --out "$OUT"
$PY scripts/ship_result.py "$OUT/full.json" data/results/benchmark.json "$CMD"
for where in main generalisation; do
  cp "$OUT/full_strip_doom64_$where.png" "data/results/benchmark_strip_$where.png"
done
