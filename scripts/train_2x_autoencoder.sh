#!/usr/bin/env bash
# Less spatial compression for #10's sharpness bar: an autoencoder at 2x (2 blocks, 32x32
# latents of a 64x64 frame) with 4 latent channels, i.e. exactly as many numbers a frame
# (4,096) as the 16-channel 4x one of scripts/train_wide_latents.sh, so the pair compares
# spatial against channel compression at one latent size. From scratch (no wider
# autoencoder has its mid block at 64 channels), 1,500 steps of 16 frames at lr 5e-4 on the
# 1,800 random-start episodes of scripts/train_cpu_level_world.sh, one thread, on this
# repository's 2-core CPU (~1.8 s a step alone, ~50 min); resumes where it stopped.
#   bash scripts/train_2x_autoencoder.sh   (then scripts/compare_worlds.py --autoencoders)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
RUN=${RUN:-runs/ae2x}
DATA=${DATA:-runs/w2}  # scripts/train_cpu_level_world.sh's stage 1
mkdir -p "$RUN"
[ -d "$RUN/ch4/model" ] || OMP_NUM_THREADS=1 $PY -m worldlab train autoencoder \
    --preset small --batch-size 16 --device cpu --resume --data "$DATA/data" \
    --set "autoencoder__block_out_channels=(32,64)" --set autoencoder__latent_channels=4 \
    --out "$RUN/ch4" --steps 1500 --set autoencoder__lr=5e-4 >> "$RUN/ch4.log" 2>&1
