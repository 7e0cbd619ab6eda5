#!/usr/bin/env bash
# The interpreters of bench/bench_embed.py's exported peers, each in its own venv: their pins
# clash with sentray's (transformers 5.24, torch 2.13.0+cpu).
#
#   onnx/      sentence-transformers 5.7 + optimum-onnx[onnxruntime] (transformers < 4.58):
#              the ONNX fp32 and dynamic-int8 peers (--onnx-python)
#   openvino/  sentence-transformers 6.3 + optimum-intel[openvino,nncf] (transformers < 5.6):
#              the OpenVINO static-int8 peer (--ov-python)
#
#   bash bench/peer_venvs.sh [FOLDER]     # default out/peer-venvs in the repository
#
# torch==2.13.0 is installed first and named again in the second step: it is the CPU wheel on
# this machine's disk; any other torch (e.g. the 2.14.1 that the newest torchvision asks for) is a
# multi-GB CUDA build from the registry. optimum-intel requires torchvision, and the registry's
# torchvision for 2.13.0 is linked against the CUDA torch (libtorch_cuda.so): importing it fails
# under the CPU torch ("operator torchvision::nms does not exist") and takes transformers' imports
# down with it; only optimum-intel's visual-language models use it, so it is uninstalled again.
set -euo pipefail

ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/out/peer-venvs}"
TORCH="torch==2.13.0"
declare -A PACKAGES=(
  [onnx]="sentence-transformers==5.7.0 optimum-onnx[onnxruntime]==0.1.0 transformers==4.57.6"
  [openvino]="sentence-transformers==6.3.0 optimum-intel[openvino,nncf]==2.2.0 transformers==5.5.4"
)

mkdir -p "$ROOT"
for name in onnx openvino; do
  venv="$ROOT/$name"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q "$TORCH"
  # shellcheck disable=SC2086  # the package list is split on purpose
  "$venv/bin/pip" install -q "$TORCH" ${PACKAGES[$name]}
  if [ "$name" = openvino ]; then "$venv/bin/pip" uninstall -y -q torchvision; fi
done

for name in onnx openvino; do
  python="$ROOT/$name/bin/python"
  "$python" - <<'EOF'
import importlib.metadata as md, sys
names = ["torch", "transformers", "sentence-transformers", "optimum", "optimum-onnx",
         "onnxruntime", "onnx", "optimum-intel", "openvino", "nncf"]
found = []
for name in names:
    try:
        found.append(f"{name}=={md.version(name)}")
    except md.PackageNotFoundError:
        pass
print(sys.executable, *found)
EOF
done
echo "export SENTRAY_ONNX_PYTHON=$ROOT/onnx/bin/python SENTRAY_OV_PYTHON=$ROOT/openvino/bin/python"
