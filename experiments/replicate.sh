#!/usr/bin/env bash
# The SIFTER paper's own STS setting in one command: from a raw pretrained encoder (MODEL_DIR,
# e.g. bert-base-uncased, no sentence-transformers pooling) with [CLS] + the train-time MLP
# (SimCSE's: Linear + tanh, its weights drawn from N(0, 0.02) and a zero bias),
# unsupervised SimCSE at its own dropout 0.1 and at SIFTER's 0.15, and SIFTER-SimCSE (dropout
# 0.15, lambda 1,1,1), each with its lr chosen on STS-B dev (seed 1) from {1e-5, 3e-5, 5e-5},
# then 5 paired seeds (a seed gives every objective the same sentences in the same order), one
# epoch over CORPUS, STS-B dev every 125 steps, the best checkpoint scored on the 7 STS tasks;
# then the table beside the papers' figures (BERT-base: SimCSE 76.25, SIFTER-SimCSE 78.20).
#
#   experiments/replicate.sh MODEL_DIR CORPUS      # on a GPU machine
#   experiments/replicate.sh --dry-run [MODEL_DIR [CORPUS]]   # CPU, tiny sizes, minutes
#
# CORPUS is jobs/augment.py's output folder (X, Y, Z), or a text file of one sentence a line,
# augmented here first (1M sentences: run jobs/augment.py on a cluster instead, see the README).
# It drives experiments/sifter_study.py (parts lr, main, dropout); a stopped run resumes.
# Settings from the environment (defaults for the real run / the dry run):
#   OUT          out/replicate / out/replicate-dry-run   run folders (runs/), records, table
#   SEEDS        1,2,3,4,5 / 1        LRS    1e-5,3e-5,5e-5 / 1e-5,3e-5
#   STEPS        0 (one epoch) / 3    EVAL_STEPS   125 / 3
#   TRAIN_FLAGS  "--workers 1 --use-gpu --precision bf16"
#                / "--workers 1 --cpus-per-worker 1 --batch-size 8 --eval-batch-size 64"
#   EVAL_FLAGS   "--device cuda --batch-size 256" / "--device cpu"
#   PARALLEL     1 / 2 (runs at once)          SENTRAY_DATA_DIR   SentEval's data/downstream
# The dry run uses the packaged all-MiniLM-L6-v2 (read out by [CLS] + MLP like a raw encoder),
# the first 200 sentences of the bundled Brown sample and SentEval cut to 40 pairs a file
# (experiments/tiny_senteval.py): it checks the set-up; its scores mean nothing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
DRY_RUN=0
if [[ "${1:-}" == "--dry-run" ]]; then
    DRY_RUN=1
    shift
fi
SENTEVAL="${SENTRAY_DATA_DIR:-$ROOT/../shared/data/senteval}"
if (( DRY_RUN )); then
    MODEL_DIR="${1:-all-MiniLM-L6-v2}"
    CORPUS="${2:-$ROOT/sentray/data/sample.txt}"
    OUT="${OUT:-out/replicate-dry-run}"
    SEEDS="${SEEDS:-1}" LRS="${LRS:-1e-5,3e-5}" STEPS="${STEPS:-3}" EVAL_STEPS="${EVAL_STEPS:-3}"
    TRAIN_FLAGS="${TRAIN_FLAGS:---workers 1 --cpus-per-worker 1 --batch-size 8 --eval-batch-size 64}"
    EVAL_FLAGS="${EVAL_FLAGS:---device cpu}"
    PARALLEL="${PARALLEL:-2}"
    DATA_DIR="$OUT/senteval-tiny"
    [[ -d "$DATA_DIR/STS" ]] || "$PYTHON" "$ROOT/experiments/tiny_senteval.py" \
        "$SENTEVAL" "$DATA_DIR" --pairs 40
    UNTRAINED=(--no-untrained)  # the untrained rows cost two more jobs and check nothing new
else
    if [[ $# -ne 2 ]]; then
        echo "usage: $0 MODEL_DIR CORPUS   or   $0 --dry-run [MODEL_DIR [CORPUS]]" >&2
        exit 2
    fi
    MODEL_DIR="$1" CORPUS="$2"
    OUT="${OUT:-out/replicate}"
    SEEDS="${SEEDS:-1,2,3,4,5}" LRS="${LRS:-1e-5,3e-5,5e-5}" STEPS="${STEPS:-0}"
    EVAL_STEPS="${EVAL_STEPS:-125}"
    TRAIN_FLAGS="${TRAIN_FLAGS:---workers 1 --use-gpu --precision bf16}"
    EVAL_FLAGS="${EVAL_FLAGS:---device cuda --batch-size 256}"
    PARALLEL="${PARALLEL:-1}"
    DATA_DIR="$SENTEVAL"
    UNTRAINED=()
fi
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 RAY_USAGE_STATS_ENABLED=0
mkdir -p "$OUT"

if [[ -f "$CORPUS" ]]; then  # a text file: augment it first (X, Y, Z)
    AUGMENTED="$OUT/corpus-aug"
    if [[ ! -f "$AUGMENTED/_summary.json" ]]; then
        SOURCE="$CORPUS"
        if (( DRY_RUN )); then
            SOURCE="$OUT/corpus.txt"
            head -n 200 "$CORPUS" > "$SOURCE"
        fi
        "$PYTHON" "$ROOT/jobs/augment.py" --input "$SOURCE" --output "$AUGMENTED" \
            --actors "${AUGMENT_ACTORS:-2}"
    fi
    CORPUS="$AUGMENTED"
fi

STUDY=("$PYTHON" "$ROOT/experiments/sifter_study.py" --out "$OUT/runs"
       --records "$OUT/records" --input "$CORPUS" --model "$MODEL_DIR" --data-dir "$DATA_DIR"
       --readouts cls-simcse --seeds "$SEEDS" --lrs "$LRS" --steps "$STEPS" --eval-steps "$EVAL_STEPS"
       --simcse-dropouts 0.1 --parallel "$PARALLEL" --train-flags "$TRAIN_FLAGS"
       --eval-flags "$EVAL_FLAGS")
"${STUDY[@]}" --parts lr,main,dropout "${UNTRAINED[@]}" > "$OUT/study.log"
"${STUDY[@]}" --table --paper | tee "$OUT/table.md"
