#!/usr/bin/env bash
# A model's `paper` recipe (the Tree Transformer's by default, PAPER_ARCH=structformer, on-lstm, neural-pcfg or
# compound-pcfg) on one GPU machine:
# seeds side by side with the accelerator step,
# each stopped cleanly by --max-minutes, then parsed and scored by induce; the reports under $OUT
# (benchmarks/studies/paper_recipes/README.md).
#
#   OUT=/some/folder bash benchmarks/studies/paper_recipes/gpu_session.sh              # on the GPU machine
#   OUT=/tmp/pr PAPER_DRY=1 bash benchmarks/studies/paper_recipes/gpu_session.sh       # here: tiny, CPU
#
# Carried: .whl/ (nltk, conllu, joblib wheels) and .gpu-data/ptb.{train,valid}.txt (the ptb-lm text,
# copied from ../shared/data/ptb-lm/). Settings: PAPER_ARCH (tree-transformer), PAPER_SEEDS ("0 1 2"; the
# StructFormer's and the ON-LSTM's: "0"), PAPER_TRAIN_MINUTES (6.5), PAPER_BUDGET_S (560: the whole script, a hard limit),
# PAPER_COMMIT (the code's commit, for the log), PAPER_SET (config fields for every seed, e.g.
# "kernel=triton": the model's Triton kernels: the Tree Transformer's prior, StructFormer's parse stage and
# attention, the ON-LSTM's cell, its default; the old spellings constituent_fused=, dependency_kernel=,
# cell_kernel= are still taken; a Triton setting is
# used only when its kernels' tests pass on the machine first, else the run takes the written path;
# PAPER_SET="" for none), PAPER_PRESET (the ON-LSTM's size: mini, its CPU run's; paper with the Triton cell
# where its speed allows; the others train at the paper size).
set -u
cd "$(dirname "$0")/../../.."

: "${OUT:?set OUT to the folder the outputs go to}"
mkdir -p "$OUT"
DRY=${PAPER_DRY:-0}
ARCH=${PAPER_ARCH:-tree-transformer}
if [ "$ARCH" = tree-transformer ]; then SEEDS=${PAPER_SEEDS:-0 1 2}; else SEEDS=${PAPER_SEEDS:-0}; fi
if [ "$ARCH" = tree-transformer ]; then MINUTES=${PAPER_TRAIN_MINUTES:-6.5}; else MINUTES=${PAPER_TRAIN_MINUTES:-7}; fi
BUDGET=${PAPER_BUDGET_S:-560}
TEXT=${PAPER_TEXT:-.gpu-data/ptb.train.txt}
VALID=${PAPER_VALID:-.gpu-data/ptb.valid.txt}
. benchmarks/tools/device_session.sh # PYTHON, PYTHONPATH, install_wheels
LOG="$OUT/session.txt"
START=$SECONDS
log() { echo "[paper_recipes +$((SECONDS - START))s] $*" | tee -a "$LOG"; }

log "start: ${ARCH} ${PAPER_SET-(default settings)}, seeds ${SEEDS}, ${MINUTES} training minutes each, budget ${BUDGET} s, dry=${DRY}, commit ${PAPER_COMMIT:-?}"
install_wheels .whl || log "wheels: none in .whl/ (benchmarks/studies/paper_recipes/README.md)"
[ -f "$TEXT" ] || { log "no training text at $TEXT: copy ../shared/data/ptb-lm/ptb.train.txt there"; exit 0; }
if [ "$DRY" = 1 ]; then  # slices of the texts
    head -n 600 "$TEXT" >/tmp/paper-dry-train.txt
    head -n 200 "$VALID" >/tmp/paper-dry-valid.txt 2>/dev/null
    TEXT=/tmp/paper-dry-train.txt VALID=/tmp/paper-dry-valid.txt
fi
# the accelerator step; the ON-LSTM's running text keeps its state across steps: its step stays eager
STEP=(--fixed-shapes --pad-to-multiple 8 --prefetch --tf32 --step-graph cuda-graph)
# the ON-LSTM's eager step with its cell as a Triton kernel (about 16,000 operators a step become 1,000)
[ "$ARCH" = on-lstm ] && [ -z "${PAPER_SET+x}" ] && PAPER_SET="kernel=triton"
# a Triton setting only after its kernels' tests pass on this machine (else the written path, logged)
# (the kernel table's entries of the model's family: tests/kernels/test_kernel_table.py)
case "$ARCH" in
tree-transformer) FAMILY=constituent-triton ;;
structformer) FAMILY=dependency-triton ;;
*) FAMILY=on-lstm-triton ;;
esac
SETTINGS=""
for field in ${PAPER_SET:-}; do
    case "$field" in
    kernel=*triton* | constituent_fused=*triton* | cell_kernel=*triton* | dependency_kernel=*triton*)
        check=tests/kernels/test_kernel_table.py ;;
    *) check="" ;;
    esac
    if [ -n "$check" ] && [ "$DRY" != 1 ]; then
        if timeout --kill-after=10 150 "$PYTHON" -m pytest -q -x -p no:cacheprovider "$check" -k "$FAMILY" >"$OUT/check-${field%%=*}.txt" 2>&1; then
            log "$field: $check passed here"
        else
            log "$field: $check did not pass here (check-${field%%=*}.txt): the written path instead"
            tail -n 3 "$OUT/check-${field%%=*}.txt" | tee -a "$LOG"
            continue
        fi
    fi
    SETTINGS="$SETTINGS $field"
done
ARCH_ARGS=(--architecture "$ARCH")
for field in $SETTINGS; do ARCH_ARGS+=(--set "$field"); done
# the checks' time comes out of the training minutes: the time after training (parse, score) stays
if [ "$SECONDS" -gt "$START" ]; then
    MINUTES=$("$PYTHON" -c "import sys; m, used = map(float, sys.argv[1:]); print(round(m - used / 60, 2))" \
        "$MINUTES" $((SECONDS - START)))
    log "training minutes after the checks: $MINUTES"
fi
# the StructFormer's and the ON-LSTM's recipes keep the model of the best validation loss; the ON-LSTM at
# the size of its CPU run (mini: the paper size's eager step is about 4 steps/s)
[ "$ARCH" != tree-transformer ] && ARCH_ARGS+=(--valid "$VALID")
[ "$ARCH" = on-lstm ] && ARCH_ARGS+=(--preset "${PAPER_PRESET:-mini}") && STEP=(--tf32)
# a PCFG (neural-pcfg, compound-pcfg: the paper's 30/60 symbols, batches of 4, 10 epochs): its batches'
# shapes follow the length curriculum, so an eager step; no Triton kernel
case "$ARCH" in *pcfg) STEP=(--tf32) ;; esac
if [ "$DRY" = 1 ]; then  # a slice of the text (above), the tiny preset (after --preset mini: it wins), 20 steps or two epochs
    SIZE=(--preset tiny --threads 1)
    if [ "$ARCH" = tree-transformer ]; then SIZE+=(--max-steps 20); else SIZE+=(--epochs 2); fi
else
    SIZE=(--max-minutes "$MINUTES")
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a "$LOG"
fi
RUNS=$(mktemp -d /tmp/paper-runs.XXXXXX)
pids=()
for seed in $SEEDS; do
    # the recipe (optimiser, masking, lengths, 60,000 steps, decoder) with the accelerator step
    timeout --kill-after=10 $((BUDGET - 20 - (SECONDS - START))) "$PYTHON" -m syntaxformer.cli induce --recipe paper "${ARCH_ARGS[@]}" --corpus "$TEXT" \
        --seed "$seed" "${SIZE[@]}" "${STEP[@]}" \
        --out "$RUNS/seed$seed" >"$OUT/seed$seed.log" 2>&1 &
    pids+=($!)
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    log "seed index $i: exit $?"
done
for seed in $SEEDS; do
    run="$RUNS/seed$seed"
    if [ -f "$run/report.json" ]; then
        cp "$run/report.json" "$OUT/$ARCH-paper-gpu-seed$seed.json"
        cp "$run/curve.png" "$OUT/$ARCH-paper-gpu-seed$seed-curve.png" 2>/dev/null
        cp "$run/curve.svg" "$OUT/$ARCH-paper-gpu-seed$seed-curve.svg" 2>/dev/null
        "$PYTHON" - "$run/report.json" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
r = json.load(open(sys.argv[1]))
t, k = r["training"], r["model"].replace("-", "_")
print(r["seed"], "steps", t.get("steps"), "of", t.get("planned_steps"), "train min", t.get("minutes"),
      "tokens/s", t.get("tokens_per_second"), "| dev", round(r["parts"]["dev"][k]["sentence_f1"], 2),
      "test", round(r["parts"]["test"][k]["sentence_f1"], 2), "| RB test",
      round(r["parts"]["test"]["right_branching"]["sentence_f1"], 2))
PY
    else
        log "seed $seed: no report (see seed$seed.log)"
        tail -n 5 "$OUT/seed$seed.log" | tee -a "$LOG"
    fi
done
log "done"
exit 0
