#!/usr/bin/env bash
# The translation study at the anchor's full schedule on one GPU machine: every system of SYSTEMS trained side
# by side on the one GPU (8,000 steps of 4,096 tokens, 2,000 warm-up steps, the last 10 epoch-end models
# averaged), each stopped cleanly by --max-minutes, then both test sets scored; the reports under $OUT
# (benchmarks/studies/translation/README.md, "On a GPU").
#
#   OUT=/some/folder bash benchmarks/studies/translation/gpu_session.sh                   # on the GPU machine
#   OUT=/tmp/tr TRANSLATION_DRY=1 bash benchmarks/studies/translation/gpu_session.sh      # here: tiny, CPU
#
# Carried: .whl/ (sacrebleu, sacremoses and the wheels they need; nltk, conllu, joblib) and .gpu-data/multi30k
# (tok/ and raw/ of ../shared/data/multi30k) with .gpu-data/translation-tree-cache (the source trees of the
# training and validation files, from a CPU run's tree cache: the shipped parsers need not parse 29,000
# sentences on the machine). Settings: SYSTEMS (all five), TRANSLATION_SEED (0), TARGET (de),
# TRANSLATION_STEPS (8000), TRANSLATION_MAX_TOKENS (4096, the preset's; 8192 gives each update the anchor's two
# GPUs' tokens, docs/reference/DESIGN.md §11), TRANSLATION_MINUTES (6: each run's training limit),
# TRANSLATION_BUDGET_S (560: the whole script, a hard limit), TRANSLATION_COMMIT (the code's commit, for the log).
set -u
cd "$(dirname "$0")/../../.."

: "${OUT:?set OUT to the folder the outputs go to}"
mkdir -p "$OUT"
DRY=${TRANSLATION_DRY:-0}
SYSTEMS=${SYSTEMS:-baseline structural-position on-lstm-san mgsa-ngram mgsa-syntactic}
SEED=${TRANSLATION_SEED:-0}
L=${TARGET:-de}
STEPS=${TRANSLATION_STEPS:-8000}
MAX_TOKENS=${TRANSLATION_MAX_TOKENS:-4096}
MINUTES=${TRANSLATION_MINUTES:-6}
BUDGET=${TRANSLATION_BUDGET_S:-560}
DATA=.gpu-data/multi30k
CACHE=.gpu-data/translation-tree-cache
. benchmarks/tools/device_session.sh # PYTHON, PYTHONPATH, install_wheels
LOG="$OUT/session.txt"
START=$SECONDS
log() { echo "[translation +$((SECONDS - START))s] $*" | tee -a "$LOG"; }

log "start: ${SYSTEMS}; seed ${SEED}, en-${L}, ${STEPS} steps of ${MAX_TOKENS} tokens, at most ${MINUTES} training minutes each, budget ${BUDGET} s, dry=${DRY}, commit ${TRANSLATION_COMMIT:-?}"
install_wheels .whl || log "wheels: none in .whl/ (benchmarks/studies/translation/README.md)"
[ -f "$DATA/tok/train.lc.norm.tok.en" ] || { log "no data at $DATA: copy ../shared/data/multi30k's tok/ and raw/ there"; exit 0; }
T=$DATA/tok
ARGS=(--preset anchor --max-steps "$STEPS" --max-tokens "$MAX_TOKENS" --warmup-steps 2000 --average-last 10
    --max-minutes "$MINUTES")
DEVICE=cuda
if [ "$DRY" = 1 ]; then  # slices of the data, the tiny model, 20 steps on the CPU
    mkdir -p /tmp/translation-dry
    for f in train.lc.norm.tok.en "train.lc.norm.tok.$L" val.lc.norm.tok.en "val.lc.norm.tok.$L"; do
        head -n 300 "$T/$f" >"/tmp/translation-dry/$f"
    done
    for t in test_2016_flickr test_2017_flickr; do
        head -n 20 "$T/$t.lc.norm.tok.en" >"/tmp/translation-dry/$t.lc.norm.tok.en"
        head -n 20 "$T/$t.lc.norm.tok.$L" >"/tmp/translation-dry/$t.lc.norm.tok.$L"
    done
    T=/tmp/translation-dry
    ARGS=(--preset tiny --max-steps 20 --warmup-steps 5 --average-last 2 --max-tokens 512 --vocab-size 600 --threads 1)
    DEVICE=cpu
fi
"$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" | tee -a "$LOG"

# every system at once on the one GPU (each model is small: 2.6 to 3.8 million parameters)
for system in $SYSTEMS; do
    run="$OUT/$system-s$SEED"
    timeout --kill-after=10 $((BUDGET - 150)) "$PYTHON" -m syntaxformer.cli translation train --out "$run" \
        --variant "$system" --seed "$SEED" --source "$T/train.lc.norm.tok.en" --target "$T/train.lc.norm.tok.$L" \
        --valid-source "$T/val.lc.norm.tok.en" --valid-target "$T/val.lc.norm.tok.$L" --target-language "$L" \
        "${ARGS[@]}" --device "$DEVICE" --tree-cache "$CACHE" --quiet --json >"$run.train.json" 2>"$run.log" &
done
wait
log "trained: $(for s in $SYSTEMS; do printf '%s ' "$s:$(grep -o '"stopped": "[a-z_]*"' "$OUT/$s-s$SEED/report.json" 2>/dev/null | cut -d'"' -f4)"; done)"

# both test sets, every system at once
for system in $SYSTEMS; do
    run="$OUT/$system-s$SEED"
    [ -f "$run/report.json" ] || { log "$system: no report (see $system-s$SEED.log)"; continue; }
    for test in test_2016_flickr test_2017_flickr; do
        raw="$DATA/raw/$test.$L.gz"
        [ "$DRY" = 1 ] && raw="$T/$test.lc.norm.tok.$L"
        timeout --kill-after=10 $((BUDGET - (SECONDS - START) - 10)) "$PYTHON" -m syntaxformer.cli translation evaluate \
            --model "$run" --source "$T/$test.lc.norm.tok.en" --reference "$T/$test.lc.norm.tok.$L" \
            --raw-reference "$raw" --hypotheses "$run/$test.hyp" --device "$DEVICE" --json \
            >"$run/$test.json" 2>>"$run.log" &
    done
done
wait
for system in $SYSTEMS; do
    run="$OUT/$system-s$SEED"
    "$PYTHON" - "$run" <<'EOF' | tee -a "$LOG"
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
try:
    r = json.loads((run / "report.json").read_text())
    tests = {t: json.loads((run / f"{t}.json").read_text())["bleu_tokenized"]["bleu"] for t in ("test_2016_flickr", "test_2017_flickr")}
except (OSError, ValueError, KeyError) as exc:
    print(f"{run.name}: incomplete ({exc})")
    raise SystemExit(0)
print(f"{run.name}: {r['steps']} steps ({r['stopped']}), {r['train_minutes_total']:.1f} min, "
      f"{r['train_tokens_per_second']:,.0f} target tokens/s; val BLEU {r['valid']['bleu_tokenized']['bleu']:.2f}; "
      f"test 2016 {tests['test_2016_flickr']:.2f}, 2017 {tests['test_2017_flickr']:.2f}")
EOF
    # what comes back: the reports and translations; the models' weights only for the baseline (to ship)
    rm -rf "$run/snapshots" "$run/checkpoint.pt" "$run/tensorboard"
    [ "$system" = baseline ] || rm -f "$run/model.safetensors"
done
log "done in $((SECONDS - START)) s"
