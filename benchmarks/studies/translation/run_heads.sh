#!/usr/bin/env bash
# Heads of the shipped translation model: importance (all three kinds), BLEU pruning curves (importance
# order against 3 random seeds; all heads together, the encoder's alone), hard-concrete gates on the
# encoder heads at three lambdas; then the decoder's kinds' curves. One thread; reports in records/translation/.
#   MODEL  the model folder (default: runs/shipped-candidate)   OUT  (default: records/translation)
#   DATA   the Multi30k folder (default: ../shared/data/multi30k)
set -euo pipefail
MODEL="${MODEL:-runs/shipped-candidate}"
OUT="${OUT:-records/translation}"
DATA="${DATA:-../shared/data/multi30k}"
PY="${PYTHON:-python}"
V="--source $DATA/tok/val.lc.norm.tok.en --target $DATA/tok/val.lc.norm.tok.de"
export OMP_NUM_THREADS=1
$PY -m syntaxformer.cli heads --model "$MODEL" --out "$OUT" $V --device cpu
$PY -m syntaxformer.cli prune --model "$MODEL" --out "$OUT" $V --device cpu --step 0.1 --seeds 3 \
  --curves all encoder --max-sentences 500 --gates 0.01 0.05 0.2 --gate-steps 200
$PY -m syntaxformer.cli prune --model "$MODEL" --out "$OUT/decoder" $V --device cpu --step 0.1 --seeds 3 \
  --curves decoder_self cross --max-sentences 500
