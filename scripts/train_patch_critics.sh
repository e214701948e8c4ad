#!/usr/bin/env bash
# Does the patch critic's patch size matter on 64x64 frames? At `disc_layers` 3 (the
# default, as pix2pix and taming) each of its logits sees 70x70 pixels: more than the whole
# frame, zero padding included. Decoder-only runs from one autoencoder (encoder frozen, so
# its latents and the worlds trained on them stay valid), 500 steps of 16 frames at lr 2e-4
# each, on this repository's 2-core CPU, one thread each; each resumes (times measured
# beside the two world runs of scripts/train_wide_latents.sh, 4 jobs on 2 cores):
#   p34    critic weight 0.5 after 100 steps, disc_layers 2: 34x34-pixel patches (28 min)
#   p16    the same at disc_layers 1: 16x16-pixel patches, beside p34          (27 min)
#   none   then the same steps without a critic (the control)                  (17 min)
# and, without a critic, the amplitude-spectrum term (losses.spectral_distance) at two
# weights, one after the other beside scripts/train_2x_autoencoder.sh; the weight to report
# is chosen on the runs' own held-out frames (metrics.json), not on the compared episodes:
#   spectral1, spectral3   spectral_weight 1 and 3                      (13 min each)
# and the chosen weight with the encoder learning too (new latents, so a new world's):
#   whole_spectral1
#   bash scripts/train_patch_critics.sh    (then scripts/compare_worlds.py --autoencoders)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/autoencoder_recipe.sh
PY=${PY:-.venv/bin/python}
AE=${AE:-runs/wide/ch16/model}  # scripts/train_wide_latents.sh's 16-channel autoencoder
RUN=${RUN:-runs/critics}
DATA=${DATA:-runs/w2}  # scripts/train_cpu_level_world.sh's stage 1
mkdir -p "$RUN"

decoder() {  # name, then --set overrides; ENCODER=True lets the encoder learn too
  fine_tune_autoencoder "$AE" "$RUN/$1" "${ENCODER:-False}" "${@:2}" >> "$RUN/$1.log" 2>&1
}
CRITIC=(--set autoencoder__disc_weight=0.5 --set autoencoder__disc_start=100)
decoder p34 "${CRITIC[@]}" --set autoencoder__disc_layers=2 &
a=$!
decoder p16 "${CRITIC[@]}" --set autoencoder__disc_layers=1 &
b=$!
wait $a; wait $b  # either failing fails the script (set -e)
decoder none
for w in 1 3; do decoder "spectral$w" --set autoencoder__spectral_weight=$w; done
ENCODER=True decoder whole_spectral1 --set autoencoder__spectral_weight=1
