#!/usr/bin/env bash
# SIFTER-SimCSE vs unsupervised SimCSE from the packaged all-MiniLM-L6-v2 on the augmented Brown
# corpus, 3 seeds each, same budget; then the 7 STS tasks on every exported model.
# Usage (from the repository root): bash docs/experiments/sifter_vs_simcse.sh [OUT] [STEPS]
set -euo pipefail
OUT=${1:-out/exp}
STEPS=${2:-100}
DATA=${SENTRAY_DATA_DIR:-../shared/data/senteval}
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 RAY_USAGE_STATS_ENABLED=0 HF_HUB_OFFLINE=1
mkdir -p "$OUT"

# 1. X/Y/Z for the 55,042 Brown sentences (resumes: a complete output is left as it is)
python jobs/augment.py --input ../shared/data/corpus/brown.txt --output out/brown-aug --actors 2

# 2. the initial encoder, with the pooling training uses ([CLS]) and its own (mean)
# (each step is skipped when its results exist, so a stopped experiment resumes)
[ -f "$OUT/base-cls/results.json" ] ||
  python jobs/evaluate.py --pooling cls_before_pooler --data-dir "$DATA" --out "$OUT/base-cls"
[ -f "$OUT/base-mean/results.json" ] ||
  python jobs/evaluate.py --pooling mean --data-dir "$DATA" --out "$OUT/base-mean"

# 3. both objectives, 3 seeds, same steps, batch 64, lr 1e-5, dropout 0.15, max_length 32
for seed in 1 2 3; do
  for objective in sifter simcse; do
    run="$OUT/$objective-seed$seed"
    [ -f "$run/eval/results.json" ] && continue
    python jobs/train.py --input out/brown-aug --output "$run" --objective "$objective" \
      --seed "$seed" --max-steps "$STEPS" --eval-steps 25 --workers 1 --cpus-per-worker 2 \
      --data-dir "$DATA" 2>&1 | grep --line-buffered -v "Warning" > "$run.log"
    python jobs/evaluate.py --model "$run/best" --data-dir "$DATA" --out "$run/eval"
  done
done

# 4. the table (mean +- std over seeds)
python docs/experiments/table.py "$OUT"
