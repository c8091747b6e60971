#!/usr/bin/env bash
# The student's two stages: imitation of the ensemble's trees, then the trees beside the student's own
# masked LM, the mixture chosen on the dev half; every run scored beside the ensemble and tried as a member.
#   OUT     where the runs go (default: runs/student)   CORPUS  the unlabelled text (default: the ptb-lm training text)
#   MIXTURES  the second stage's "tree_weight:mlm_weight" pairs (default: 1:1 1:0.1 0:1, and 1:0: the control)
#   EPOCHS2   the second stage's epochs (default 2)     PYTHON  the interpreter (default: python)
# One thread per run; a finished run (report.json present) is skipped.
set -euo pipefail
OUT="${OUT:-runs/student}"
CORPUS="${CORPUS:-../shared/data/ptb-lm/ptb.train.txt}"
PY="${PYTHON:-python}"
mkdir -p "$OUT"
if [ ! -f "$OUT/stage1/report.json" ]; then  # the first stage: the recipe of the ensemble page
  $PY -m syntaxformer.cli distill --out "$OUT/stage1" --corpus "$CORPUS" --epochs 10 --train all --lr 5e-4 \
    --schedule linear --parser-layers 4 --threads 1
fi
for mixture in ${MIXTURES:-1:1 1:0.1 0:1 1:0}; do
  run="$OUT/stage2-tree${mixture%%:*}-mlm${mixture##*:}"
  if [ ! -f "$run/report.json" ]; then
    mkdir -p "$run" && cp "$OUT/stage1/teacher.jsonl" "$run/"  # the teacher's trees, not parsed again
    $PY -m syntaxformer.cli distill --out "$run" --student "$OUT/stage1/model" --corpus "$CORPUS" \
      --tree-weight "${mixture%%:*}" --mlm-weight "${mixture##*:}" --epochs "${EPOCHS2:-2}" --train all \
      --lr 1e-4 --schedule linear --clip 0.25 --threads 1
  fi
done
# then score them all beside the ensemble, the best on dev among the candidates (here: stage2-tree1-mlm0.1):
#   python -m benchmarks.studies.ensemble.ensemble_study --voters right-branching \
#     --candidates structformer-ptb-lm,tree-transformer-ptb-lm,on-lstm-ptb-lm,$OUT/BEST/model \
#     --student $OUT/stage1 --student $OUT/stage2-... --out records/ensemble/two-stage.json
