# Fine-tuning an autoencoder of the level world, the recipe of the 500-step comparisons in
# data/README.md: from the autoencoder at AE (its levels and latent channels, read from its
# config), 500 steps of 16 frames at lr 2e-4 on $DATA/data, one thread; TRAIN_ENCODER False
# keeps its latents (the decoder alone learns). Skipped when OUT/model exists, resumed
# otherwise. Reads $PY and $DATA. Sourced by the training scripts:
#   fine_tune_autoencoder AE OUT TRAIN_ENCODER [--set SECTION__FIELD=VALUE ...]
fine_tune_autoencoder() {
  local ae=$1 out=$2 encoder=$3 shape
  shift 3
  [ -d "$out/model" ] && return 0
  shape=$($PY -c "import json, sys; c = json.load(open(sys.argv[1]))
print(','.join(map(str, c['block_out_channels'])), c['latent_channels'])" "$ae/config.json")
  OMP_NUM_THREADS=1 $PY -m worldlab train autoencoder --preset small --batch-size 16 \
      --device cpu --resume --data "$DATA/data" \
      --set "autoencoder__block_out_channels=(${shape% *})" \
      --set autoencoder__latent_channels="${shape#* }" \
      --out "$out" --init "$ae" --steps 500 --set autoencoder__lr=2e-4 \
      --set autoencoder__train_encoder="$encoder" "$@"
}
