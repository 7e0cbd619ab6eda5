#!/usr/bin/env bash
# The GPU path measured in one command (issue 12, section 4): the GPU-marked tests, encoder
# throughput (mean / fast Ditto / eager Ditto at fp32, fp16, bf16), Ditto's peak memory, and
# jobs/train.py steps/s, into OUT/gpu_check.json and OUT/gpu_check.md (default out/gpu_check).
#
#   bash bench/gpu_check.sh                      # one NVIDIA GPU, under 8 minutes
#   bash bench/gpu_check.sh --dry-run            # CPU, tiny sizes: checks the script itself
#   bash bench/gpu_check.sh --out DIR --skip-train --peak-tflops 989 ...
#
# Every other flag goes to `python -m bench.gpu_check` (--help lists them), run from the
# repository root. Exits non-zero when a step failed; the table is printed either way.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."   # the repository root, whatever the caller's cwd
export HF_HUB_OFFLINE=1                   # the packaged model only; never the Hub
# Local Ray clusters on these machines must bind loopback only; the file is absent elsewhere.
if [ -f ../shared/ray-offline.sh ]; then
    # shellcheck disable=SC1091
    . ../shared/ray-offline.sh
fi

out=out/gpu_check
previous=""
for arg in "$@"; do
    case "$arg" in
        --out=*) out="${arg#--out=}" ;;
        *) if [ "$previous" = "--out" ]; then out="$arg"; fi ;;
    esac
    previous="$arg"
done
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

status=0
"${PYTHON:-python3}" -m bench.gpu_check "$@" || status=$?
if [ -f "$out/gpu_check.md" ]; then
    echo
    cat "$out/gpu_check.md"
    echo
    echo "JSON: $out/gpu_check.json"
fi
exit "$status"
