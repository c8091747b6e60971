#!/usr/bin/env bash
# One prepared session on a GPU machine (benchmarks/speed/README.md, "gpu_session.sh"), from the repository
# root, the package run from the tree (PYTHONPATH), its outputs under $OUT:
#
#   OUT=/some/folder bash benchmarks/speed/gpu_session.sh            # on the GPU machine
#   OUT=/tmp/gs GPU_SESSION_DRY=1 bash benchmarks/speed/gpu_session.sh  # here, on the CPU: every part, tiny
#
# Parts, in order of value, each under a hard `timeout`, the whole under GPU_SESSION_BUDGET_S (540 s):
#   0. the carried wheels (GPU_WHEELS, default .whl/: nltk, conllu, joblib) into a private folder on PYTHONPATH;
#      nvidia-smi, python, torch and transformers versions          -> $OUT/session.txt
#   1. tests/kernels/test_cuda.py, test_kernel_table.py, test_triton_paths.py (all in tests/kernels/) (CUDA) -> $OUT/test_cuda.txt
#   2. benchmarks/speed/gpu_step.py (GPU_SESSION_STEP_CASES), `graph` rows first (every kernel setting
#      but the fused one), then `eager` and `graph-bf16` for the default settings (at most 300 s)
#                                                                      -> $OUT/gpu-step.json, $OUT/gpu-step.log
#   2a. gpu_step.py's `compiled` rows of the Tree Transformer paper preset, with and without the prior
#      (at most 150 s)                                                 -> $OUT/gpu-step-compiled.json, .log
#   2b. benchmarks/speed/gpu_profile.py: the Tree Transformer paper step's device time by the package's
#      line, with and without the prior                              -> $OUT/gpu-profile.json, .log
#   3. with the time left (at least GPU_SESSION_MIN_TRAIN_S each), two `syntaxformer train` runs of the
#      Tree Transformer paper preset on ptb-sample, up to 2,000 steps: the eager step and the fast one
#      (--fixed-shapes --pad-to-multiple 8 --tf32 --prefetch --step-graph cuda-graph), each stopped
#      cleanly by --max-minutes at its share of the time  -> $OUT/train.log, $OUT/curves.json
# A part that fails or runs out of time is logged and the next one runs; the script exits 0.
set -u
cd "$(dirname "$0")/../.."

: "${OUT:?set OUT to the folder the outputs go to}"
mkdir -p "$OUT"
DRY=${GPU_SESSION_DRY:-0}
BUDGET=${GPU_SESSION_BUDGET_S:-540}
MIN_TRAIN=${GPU_SESSION_MIN_TRAIN_S:-60}
WHEELS=${GPU_WHEELS:-.whl}
. benchmarks/tools/device_session.sh # PYTHON, PYTHONPATH, install_wheels
LOG="$OUT/session.txt"
# gpu_step's cases (indices into its CASES): every kernel setting but the fused one (the Triton kernels supersede it)
STEP_CASES=${GPU_SESSION_STEP_CASES:-"0 1 2 3 4 6 7 8 9"}
START=$SECONDS

exec 3>&1 # the session's own output: log lines go there even from a part whose output is redirected
log() { echo "[gpu_session +$((SECONDS - START))s] $*" | tee -a "$LOG" >&3; }
left() { echo $((BUDGET - (SECONDS - START))); }
# part NAME LIMIT_S COMMAND...: COMMAND under `timeout LIMIT_S`, its exit status logged
part() {
    local name=$1 limit=$2
    shift 2
    log "$name: start (limit ${limit} s)"
    timeout --kill-after=10 "$limit" "$@"
    local rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        log "$name: TIMED OUT after ${limit} s"
    else
        log "$name: exit $rc"
    fi
    return 0
}

# 0. wheels and versions ------------------------------------------------------------------------------
log "start: budget ${BUDGET} s, dry=${DRY}, python=${PYTHON}"
install_wheels "$WHEELS" || log "wheels: none in $WHEELS/ (make them here: benchmarks/speed/README.md, make-wheels)"
{
    if command -v nvidia-smi >/dev/null; then nvidia-smi 2>&1; else echo "nvidia-smi: not available"; fi
    "$PYTHON" -c "import sys, torch, transformers; print('python', sys.version.split()[0], '| torch', torch.__version__,
'| cuda', torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name(0),
'| transformers', transformers.__version__)" 2>&1
    "$PYTHON" -c "import nltk, conllu, syntaxformer; print('nltk', nltk.__version__, '| conllu ok | syntaxformer', syntaxformer.__file__)" 2>&1
    "$PYTHON" -c "import triton; print('triton', triton.__version__)" 2>&1
} | tee -a "$LOG"

if [ "$DRY" = 1 ]; then
    DEVICE=cpu
    STEP_ARGS=(--smoke --steps 3 --warmup 1)
    TRAIN_PRESET=tiny
    TRAIN_STEPS=20
    TEST_LIMIT=120
    STEP_LIMIT=240
    COMPILED_LIMIT=120
else
    DEVICE=cuda
    STEP_ARGS=(--steps 40 --warmup 3)
    TRAIN_PRESET=paper
    TRAIN_STEPS=2000
    TEST_LIMIT=150
    STEP_LIMIT=300
    COMPILED_LIMIT=150
fi

# 1. the CUDA tests ------------------------------------------------------------------------------------
part test_cuda "$TEST_LIMIT" "$PYTHON" -m pytest -q -p no:cacheprovider tests/kernels/test_cuda.py tests/kernels/test_kernel_table.py tests/kernels/test_triton_paths.py \
    >"$OUT/test_cuda.txt" 2>&1
tail -n 15 "$OUT/test_cuda.txt" | tee -a "$LOG"

# 2. the step benchmark --------------------------------------------------------------------------------
limit=$(($(left) - 30))
[ "$limit" -gt "$STEP_LIMIT" ] && limit=$STEP_LIMIT
if [ "$limit" -gt 30 ]; then
    # the rows stop 20 s before the hard limit; a row stops itself at 120 s (a compilation, say)
    part gpu_step "$limit" "$PYTHON" -m benchmarks.speed.gpu_step --device "$DEVICE" "${STEP_ARGS[@]}" \
        --variants graph eager graph-bf16 --cases $STEP_CASES --baselines-only eager graph-bf16 \
        --isolate --budget-s $((limit - 20)) --row-limit-s 120 \
        ${GPU_SESSION_COMMIT:+--commit "$GPU_SESSION_COMMIT"} --out "$OUT/gpu-step.json" >"$OUT/gpu-step.log" 2>&1
    tail -n 3 "$OUT/gpu-step.log" | tee -a "$LOG"
else
    log "gpu_step: skipped, ${limit} s left"
fi

# 2a. the compiled step (torch.compile, CUDA graphs), the Tree Transformer paper preset with and without
# the prior (gpu_step's cases 0 and 1; its compilation takes a minute or more) -------------------------
limit=$(($(left) - 30))
[ "$limit" -gt "$COMPILED_LIMIT" ] && limit=$COMPILED_LIMIT
if [ "$limit" -gt 60 ]; then
    part gpu_step_compiled "$limit" "$PYTHON" -m benchmarks.speed.gpu_step --device "$DEVICE" "${STEP_ARGS[@]}" \
        --variants compiled --cases 0 1 --isolate --budget-s $((limit - 15)) --row-limit-s $((limit - 15)) \
        ${GPU_SESSION_COMMIT:+--commit "$GPU_SESSION_COMMIT"} --out "$OUT/gpu-step-compiled.json" \
        >"$OUT/gpu-step-compiled.log" 2>&1
    tail -n 3 "$OUT/gpu-step-compiled.log" | tee -a "$LOG"
else
    log "gpu_step_compiled: skipped, ${limit} s left"
fi

# 2b. where the step's device time goes, by the package's line (what fusion should replace) -------------
limit=$(($(left) - 30))
[ "$limit" -gt 90 ] && limit=90
if [ "$limit" -gt 30 ]; then
    PROFILE_ARGS=(--steps 5)
    [ "$DRY" = 1 ] && PROFILE_ARGS=(--steps 2 --smoke)
    part gpu_profile "$limit" "$PYTHON" -m benchmarks.speed.gpu_profile --device "$DEVICE" "${PROFILE_ARGS[@]}" \
        ${GPU_SESSION_COMMIT:+--commit "$GPU_SESSION_COMMIT"} --out "$OUT/gpu-profile.json" >"$OUT/gpu-profile.log" 2>&1
    grep -v USDT "$OUT/gpu-profile.log" | head -n 30 | tee -a "$LOG"
else
    log "gpu_profile: skipped, ${limit} s left"
fi

# 3. loss curves: eager against the fast step ----------------------------------------------------------
share=$((($(left) - 20) / 2))
if [ "$share" -ge "$MIN_TRAIN" ]; then
    TRAIN_DIR=$(mktemp -d /tmp/gpu-session-train.XXXXXX)
    # ptb-sample (the default corpus), on CUDA where there is one (the default device)
    common=(--preset "$TRAIN_PRESET" --set 'constituent_variant="official"' --batch-size 64
        --max-steps "$TRAIN_STEPS" --log-every 20 --eval-every 200 --save-every 0 --seed 0 --quiet)
    # each run stops itself (and writes training.json) 15 s before its hard limit
    minutes=$("$PYTHON" -c "print(round(($share - 15) / 60, 2))")
    part train-cuda-graph "$share" "$PYTHON" -m syntaxformer.cli train --out "$TRAIN_DIR/cuda-graph" "${common[@]}" \
        --max-minutes "$minutes" --fixed-shapes --pad-to-multiple 8 --tf32 --prefetch --step-graph cuda-graph \
        >>"$OUT/train.log" 2>&1
    share=$(($(left) - 10))
    minutes=$("$PYTHON" -c "print(round(($share - 15) / 60, 2))")
    if [ "$share" -ge "$MIN_TRAIN" ]; then
        part train-eager "$share" "$PYTHON" -m syntaxformer.cli train --out "$TRAIN_DIR/eager" "${common[@]}" \
            --max-minutes "$minutes" >>"$OUT/train.log" 2>&1
    else
        log "train-eager: skipped, ${share} s left"
    fi
    "$PYTHON" - "$TRAIN_DIR" "$OUT/curves.json" <<'EOF' 2>&1 | tee -a "$LOG"
"""Both runs' training.json (less arguments' noise) and their training-loss curve from TensorBoard."""
import json
import sys
from pathlib import Path

runs = {}
for folder in sorted(Path(sys.argv[1]).iterdir()):
    report = folder / "training.json"
    run = json.loads(report.read_text()) if report.exists() else {"missing": "no training.json"}
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        events = EventAccumulator(str(folder / "tensorboard"), size_guidance={"scalars": 0})
        events.Reload()
        run["train_loss_curve"] = [[s.step, round(s.value, 5)] for s in events.Scalars("train/loss")]
    except Exception as error:  # the curve is a bonus; training.json is the record
        run["train_loss_curve_error"] = f"{type(error).__name__}: {error}"
    runs[folder.name] = run
    keys = ("steps", "stopped", "minutes", "tokens_per_second", "final_train_loss", "final_valid_loss")
    print(folder.name, {k: run.get(k) for k in keys})
Path(sys.argv[2]).write_text(json.dumps(runs, indent=1) + "\n")
EOF
else
    log "train: skipped, ${share} s for each run"
fi
log "done"
exit 0
