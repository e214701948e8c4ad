# The level world's architecture and fine-tuning recipe: doom64_teacher's, which
# scripts/train_cpu_level_world.sh trains, and train_level_world_long.sh and
# train_procedural_world.sh continue from its weights (so their model fields must match).
# Sourced by those scripts:  $PY -m worldlab train world "${LEVEL_WORLD[@]}" --data ... --out ...
LEVEL_WORLD=(--preset small --batch-size 32 --device cpu
  --set model__patch_size=2 --set model__width=192 --set model__depth=4
  --set train__forcing=teacher --set train__ema_decay=0.995
  --set model__window_chunks=3 --set data__clip_chunks=4
  --set train__lr=3e-4 --set train__warmup_steps=50 --set sample__steps=16)

# doom64_teacher's transformer moved onto another autoencoder's latents (train world
# --init-transformer), at the patch that keeps its 4x4 token grid of a 64x64 frame (8x
# latents at patch 2, 4x at 4, 2x at 8), 800 steps of the recipe on the 900 episodes it was
# trained on, one thread, then packaged with that autoencoder; each part resumes or is
# skipped when done. Reads $PY and $DATA.
#   teacher_on_latents AUTOENCODER LATENTS OUT PACKAGE
teacher_on_latents() {
  local ae=$1 latents=$2 out=$3 pkg=$4 patch
  patch=$($PY -c "import json, sys; c = json.load(open(sys.argv[1]))
print(2 ** (5 - len(c['block_out_channels'])))" "$ae/config.json")  # 16 / downsampling
  if [ ! -d "$out/checkpoints/step_00000800" ]; then
    local from=(--init-transformer data/checkpoints/doom64_teacher/world)
    [ -d "$out/checkpoints" ] && from=(--resume)
    OMP_NUM_THREADS=1 $PY -m worldlab train world "${LEVEL_WORLD[@]}" \
        --set model__patch_size="$patch" \
        --data "$DATA/data900" --latents "$latents" --autoencoder "$ae" \
        --captions data/checkpoints/doom64_v1/captions.safetensors \
        --set train__checkpoint_every=100 --out "$out" "${from[@]}" --steps 800
  fi
  [ -d "$pkg" ] || $PY -m worldlab train package --autoencoder "$ae" --world "$out" --out "$pkg"
}
