#!/usr/bin/env bash
# The translation study: every encoder structure at one common short schedule, then both test sets.
#   STUDY_OUT   where the runs go (default: runs/translation-study)
#   STUDY_STEPS the common schedule's steps (default 1000)   STUDY_WARMUP its warm-up (default a fifth, at most 2,000)
#   SYSTEMS     the variants, in order (default: all five)   SEEDS  (default: 0 1 2)
#   DATA        the Multi30k folder (default: ../shared/data/multi30k)   STUDY_AVERAGE  epoch-end models kept (default 5)
#   STUDY_FINAL_AVERAGE  after training, average only the last this many of them (chosen on val; default: all kept)
#   TARGET      the target language: de (default) or fr   TREE_CACHE  the source trees' cache (default: STUDY_OUT/tree-cache)
#   STUDY_MAX_TOKENS  padded tokens per update (default 4,096, the preset's; 8,192: the anchor's two GPUs' tokens)
#   STUDY_THREADS  torch threads a run (default 1: two runs side by side on a 2-core machine)
# A finished run (report.json present) is skipped, an interrupted one resumed.
set -euo pipefail
OUT="${STUDY_OUT:-runs/translation-study}"
STEPS="${STUDY_STEPS:-1000}"
WARMUP="${STUDY_WARMUP:-$(( STEPS / 5 < 2000 ? STEPS / 5 : 2000 ))}"
DATA="${DATA:-../shared/data/multi30k}"
PY="${PYTHON:-python}"
T="$DATA/tok"
L="${TARGET:-de}"
mkdir -p "$OUT"
for seed in ${SEEDS:-0 1 2}; do
  for system in ${SYSTEMS:-baseline structural-position on-lstm-san mgsa-ngram mgsa-syntactic}; do
    run="$OUT/$system-s$seed"
    if ! grep -qs '"stopped": "max_steps"' "$run/report.json"; then  # absent, or stopped early: resume
      $PY -m syntaxformer.cli translation train --out "$run" --variant "$system" --seed "$seed" \
        --source "$T/train.lc.norm.tok.en" --target "$T/train.lc.norm.tok.$L" \
        --valid-source "$T/val.lc.norm.tok.en" --valid-target "$T/val.lc.norm.tok.$L" --target-language "$L" \
        --max-steps "$STEPS" --warmup-steps "$WARMUP" --average-last "${STUDY_AVERAGE:-5}" \
        --max-tokens "${STUDY_MAX_TOKENS:-4096}" --threads "${STUDY_THREADS:-1}" --quiet --resume \
        --tree-cache "${TREE_CACHE:-$OUT/tree-cache}" --json > "$run.train.json"
    fi
    if [ -n "${STUDY_FINAL_AVERAGE:-}" ] && ! grep -qs '"chosen_after_training"' "$run/report.json"; then
      rm -f "$run"/test_*.json  # the test scores of the model before
      $PY -m syntaxformer.cli translation average --model "$run" --last "$STUDY_FINAL_AVERAGE" --device cpu --json > "$run.average.json"
    fi
    for test in test_2016_flickr test_2017_flickr; do
      if [ ! -f "$run/$test.json" ]; then
        $PY -m syntaxformer.cli translation evaluate --model "$run" --source "$T/$test.lc.norm.tok.en" \
          --reference "$T/$test.lc.norm.tok.$L" --raw-reference "$DATA/raw/$test.$L.gz" \
          --hypotheses "$run/$test.hyp" --device cpu --json > "$run/$test.json.tmp" && mv "$run/$test.json.tmp" "$run/$test.json"
      fi
    done
  done
done
