#!/usr/bin/env bash
# Less spatial compression for #10's sharpness bar, in stages that each resume:
#   1. an autoencoder at 2x (2 blocks, 32x32 latents of a 64x64 frame) with 4 latent
#      channels: exactly as many numbers a frame (4,096) as the 16-channel 4x one of
#      scripts/train_wide_latents.sh, so the pair compares spatial against channel
#      compression at one latent size. From scratch (no wider autoencoder has its mid block
#      at 64 channels), 1,500 steps of 16 frames at lr 5e-4 on the 1,800 random-start
#      episodes of scripts/train_cpu_level_world.sh, one thread (~1.9 s a step beside
#      another one-thread job on this repository's 2-core CPU, 48 min)
#   2. what it costs the world model: doom64_teacher's transformer moved onto its latents
#      (teacher_on_latents: patch 8, the same 4x4 tokens a frame as every world here), 800
#      steps of the level-world recipe on the same 900 episodes as the 4x worlds, packaged
#      (encoding 15 min, training 35 min, beside stage 3)
#   3. the amplitude-spectrum term (autoencoder.spectral_weight) as on the 4x decoder of
#      scripts/train_patch_critics.sh: 500 steps at lr 2e-4 from stage 1, its decoder alone
#      at weights 1 and 3 (the weight is chosen on the runs' own held-out frames), and the
#      whole autoencoder at both (new latents)                           (13-17 min each)
#   4. pushing the whole autoencoder further, each 500 steps from stage 1 as stage 3 (the
#      16-pixel critic as scripts/train_patch_critics.sh's p16):
#      whole_spectral10          spectral weight 10                          (16 min)
#      whole_spectral3_p16       weight 3 and the 16-pixel critic, beside it (27 min)
#   5. the term's emphasis on high frequencies (autoencoder.spectral_exponent) at weight 3:
#      whole_spectral3_k1, whole_spectral3_k2   exponents 1 and 2, side by side (17 min)
#   6. the two levers of stage 4 together, and longer:
#      whole_spectral3_p16_1500  stage 4's critic run for 1,500 steps        (55 min)
#      whole_spectral10_p16      weight 10 and the critic, beside it         (22 min)
#      whole_spectral10_p16_w1   the same at critic weight 1, after it       (22 min)
#   7. between stage 6's two critic weights, and more of the spectrum beside the critic:
#      whole_spectral10_p16_w07  weight 10 and the critic at weight 0.7       (27 min)
#      whole_spectral20_p16      weight 20 and the critic at 0.5, beside it   (27 min)
#   8. stage 7's critic 0.7 at three seeds (autoencoder.seed: the critic's weights and the
#      order of the frames), all from one ch4, so the bar's corner is placed by a mean:
#      whole_spectral10_p16_w07 (seed 0) and _seed1, _seed2, the three side by side
#   bash scripts/train_2x_autoencoder.sh         (every stage; then scripts/compare_worlds.py)
#   bash scripts/train_2x_autoencoder.sh seeds   (stage 1, then stage 8 alone)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/level_world_recipe.sh
source scripts/autoencoder_recipe.sh
PY=${PY:-.venv/bin/python}
RUN=${RUN:-runs/ae2x}
DATA=${DATA:-runs/w2}  # scripts/train_cpu_level_world.sh's stages 1 (data) and 2 (data900)
AE2X=(--preset small --batch-size 16 --device cpu --resume --data "$DATA/data"
      --set "autoencoder__block_out_channels=(32,64)" --set autoencoder__latent_channels=4)
STAGES=${1:-all}
case "$STAGES" in all|seeds) ;; *) echo "usage: $0 [all|seeds]" >&2; exit 2 ;; esac
mkdir -p "$RUN"
[ -d "$RUN/ch4/model" ] || OMP_NUM_THREADS=1 $PY -m worldlab train autoencoder "${AE2X[@]}" \
    --out "$RUN/ch4" --steps 1500 --set autoencoder__lr=5e-4 >> "$RUN/ch4.log" 2>&1

spectral() {  # name, weight, whether the encoder learns, then --set overrides
  fine_tune_autoencoder "$RUN/ch4/model" "$RUN/$1" "$3" \
      --set autoencoder__spectral_weight="$2" "${@:4}" >> "$RUN/$1.log" 2>&1
}
P16=(--set autoencoder__disc_weight=0.5 --set autoencoder__disc_start=100
     --set autoencoder__disc_layers=1)  # the 16-pixel critic of train_patch_critics.sh
W07=(10 True "${P16[@]}" --set autoencoder__disc_weight=0.7)  # stage 7's critic 0.7
seeds() {  # 8. three seeds of it, side by side (seed 0 is stage 7's run)
  spectral whole_spectral10_p16_w07_seed1 "${W07[@]}" --set autoencoder__seed=1 &
  local one=$!
  spectral whole_spectral10_p16_w07_seed2 "${W07[@]}" --set autoencoder__seed=2 &
  local two=$!
  spectral whole_spectral10_p16_w07 "${W07[@]}"
  wait $one
  wait $two
}
[ "$STAGES" = seeds ] && { seeds; exit 0; }
teacher_on_latents "$RUN/ch4/model" "$RUN/latents" "$RUN/world" "$RUN/pkg" >> "$RUN/world.log" 2>&1 &
world=$!
spectral spectral1 1 False
spectral whole_spectral1 1 True
spectral spectral3 3 False
spectral whole_spectral3 3 True
# 4. weight 10, and weight 3 with the 16-pixel critic
spectral whole_spectral10 10 True &
tenth=$!
spectral whole_spectral3_p16 3 True "${P16[@]}"
wait $tenth
wait $world  # its failure fails the script (set -e)
# 5. the term's emphasis on high frequencies (autoencoder.spectral_exponent), at weight 3
spectral whole_spectral3_k2 3 True --set autoencoder__spectral_exponent=2 &
k2=$!
spectral whole_spectral3_k1 3 True --set autoencoder__spectral_exponent=1
wait $k2
# 6. (later flags override the recipe's: --steps 1500, disc_weight 1.0)
spectral whole_spectral3_p16_1500 3 True "${P16[@]}" --steps 1500 &
long=$!
spectral whole_spectral10_p16 10 True "${P16[@]}"
spectral whole_spectral10_p16_w1 10 True "${P16[@]}" --set autoencoder__disc_weight=1.0
wait $long
# 7. critic weight 0.7 (beside weight 20 with the critic at 0.5)
spectral whole_spectral10_p16_w07 "${W07[@]}" &
w07=$!
spectral whole_spectral20_p16 20 True "${P16[@]}"
wait $w07
seeds
