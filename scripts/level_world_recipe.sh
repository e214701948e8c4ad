# The level world's architecture and fine-tuning recipe: doom64_teacher's, which
# scripts/train_cpu_level_world.sh trains, and train_level_world_long.sh and
# train_procedural_world.sh continue from its weights (so their model fields must match).
# Sourced by those scripts:  $PY -m worldlab train world "${LEVEL_WORLD[@]}" --data ... --out ...
LEVEL_WORLD=(--preset small --batch-size 32 --device cpu
  --set model__patch_size=2 --set model__width=192 --set model__depth=4
  --set train__forcing=teacher --set train__ema_decay=0.995
  --set model__window_chunks=3 --set data__clip_chunks=4
  --set train__lr=3e-4 --set train__warmup_steps=50 --set sample__steps=16)
