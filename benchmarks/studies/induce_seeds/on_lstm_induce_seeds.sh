#!/usr/bin/env bash
# `syntaxformer induce --model on-lstm`, seeds 0, 1, 2, side by side, then the README's table row.
#
#   benchmarks/on_lstm_induce_seeds.sh [RECIPE] [DEVICE]        # defaults: default cuda
#
# RECIPE: default or long (syntaxformer/models/on_lstm.py: RECIPES); DEVICE: cuda, cuda:N or cpu.
# Each run gets one CPU thread and `--max-minutes 60` (default) / 240 (long), so that the recipe's
# safety cap (19 / 149 minutes, set for an idle 2-core CPU) does not cut its fixed number of steps on a
# machine where three runs share the GPU and the CPU. Runs go to $RUNS (default runs/); each report
# is copied to docs/induce/on-lstm-RECIPE-seedN.json and seed 0's learning curve beside it, then
# benchmarks/summarise_induce.py prints the table (mean ± sample sd over the seeds). PYTHON (default
# python) must have syntaxformer installed or the repository on its path.
set -euo pipefail
recipe=${1:-default}
device=${2:-cuda}
python=${PYTHON:-python}
runs=${RUNS:-runs}
cap=$([ "$recipe" = long ] && echo 240 || echo 60)
cd "$(dirname "$0")/.."
mkdir -p "$runs" docs/induce
for seed in 0 1 2; do
  "$python" -m syntaxformer.cli induce --model on-lstm --recipe "$recipe" --seed "$seed" --device "$device" \
    --threads 1 --max-minutes "$cap" --quiet --out "$runs/on-lstm-$recipe-seed$seed" \
    > "$runs/on-lstm-$recipe-seed$seed.log" 2>&1 &
done
wait
for seed in 0 1 2; do
  cp "$runs/on-lstm-$recipe-seed$seed/report.json" "docs/induce/on-lstm-$recipe-seed$seed.json"
done
for ext in png svg; do
  cp "$runs/on-lstm-$recipe-seed0/curve.$ext" "docs/induce/on-lstm-$recipe-seed0-curve.$ext"
done
"$python" benchmarks/summarise_induce.py docs/induce/on-lstm-"$recipe"-seed{0,1,2}.json
