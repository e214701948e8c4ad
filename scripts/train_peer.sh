#!/usr/bin/env bash
# The peer baseline of the evaluation tables: a DIAMOND-style pixel U-Net (~3.8 M
# parameters, model/diamond.py) trained on the DOOM 64 px store runs/w2/data900
# (900 episodes x 64 frames) for a 45-minute budget on one CPU thread.
#   nohup bash scripts/train_peer.sh > runs/peer.log 2>&1 &
# The budget is turned into a step count once (runs/peer/train_plan.json); rerun after an
# interruption and it resumes from the newest checkpoint with the same schedule.
# Result: runs/peer/ema and runs/peer/model, read by worldlab.evaluate.peer.load_peer;
# then the EMA weights are shipped in float16 to data/checkpoints/peer_doom64 (SHIP=0: not),
# where `eval --suite full` finds the peer of the doom64 world.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${DATA:-runs/w2/data900} OUT=${OUT:-runs/peer}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
[ -f "$DATA/index.json" ] || { echo "no episode store at $DATA (index.json missing)" >&2; exit 1; }
$PY -m worldlab train diamond --data "$DATA" --out "$OUT" --minutes "${MINUTES:-45}" \
    --batch-size "${BATCH:-16}" --threads 1 --device cpu --seed 0 --resume
if [ "${SHIP:-1}" = 1 ]; then
  $PY - "$OUT" "${SHIP_TO:-data/checkpoints/peer_doom64}" <<'PY'
import shutil, sys
from pathlib import Path
from worldlab.evaluate.peer import load_peer
from worldlab.train.checkpoints import save_model_dir
run, to = Path(sys.argv[1]), Path(sys.argv[2])
save_model_dir(load_peer(run / "ema").model.half(), to)
shutil.copy(run / "train_run.json", to / "train_run.json")
print("shipped", to)
PY
fi
