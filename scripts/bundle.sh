#!/usr/bin/env bash
# Builds the desktop app's installable packages (release build) for the platform it runs on:
#   Linux    a .deb and an .rpm, checked after the build (below)
#   macOS    the .app and a .dmg
#   Windows  an .msi and an NSIS installer (run from Git Bash)
# into $CARGO_TARGET_DIR[/<target>]/release/bundle/; MEMORIA_BUNDLES=a,b picks other formats.
# Each carries the embedding model and ONNX Runtime as resources (`model/` in the app's
# resource folder, /usr/lib/Memoria/model once the .deb is installed), so semantic recall works
# on first launch with no network and no model installed. The model is taken from
# MEMORIA_BUNDLE_MODEL_DIR, else $MEMORIA_HOME/models/default, else MEMORIA_TEST_MODEL_DIR (the
# test tools' copy); `memoria model install` or scripts/install-model.sh DIR builds one.
#
# AppImage is listed in src-tauri/tauri.conf.json for builds on hosted CI (its tooling downloads
# from the network, so it is not built here). .github/workflows/release.yml runs this script on
# each platform.
#
# On Linux, after building, it extracts the .deb and checks that its binary, on an empty home,
# runs recall on the bundled model (scripts/bundle.sh --no-check skips that). Other arguments
# go to `tauri build` and `tauri bundle` (e.g. --target universal-apple-darwin).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/memoria/target}
check=1
args=()
for a in "$@"; do
  if [[ $a == --no-check ]]; then check=0; else args+=("$a"); fi
done

case "$(uname -s)" in
  Linux) runtime_name=libonnxruntime.so bundles=deb,rpm ;;
  Darwin) runtime_name=libonnxruntime.dylib bundles=app,dmg ;;
  MINGW*|MSYS*|CYGWIN*) runtime_name=onnxruntime.dll bundles=msi,nsis ;;
  *) echo "bundle: $(uname -s) is not a platform the app is built for" >&2; exit 1 ;;
esac
[[ $(uname -s) == Linux ]] || check=0
bundles=${MEMORIA_BUNDLES:-$bundles}

holds_model() { [[ -f $1/model.onnx && -f $1/tokenizer.json ]]; }
home=${MEMORIA_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/memoria}
model=""
for dir in "${MEMORIA_BUNDLE_MODEL_DIR:-}" "$home/models/default" "${MEMORIA_TEST_MODEL_DIR:-}"; do
  if [[ -n $dir ]] && holds_model "$dir"; then model=$dir; break; fi
done
if [[ -z $model ]]; then
  echo "bundle: no embedding model found in \$MEMORIA_BUNDLE_MODEL_DIR, $home/models/default or \$MEMORIA_TEST_MODEL_DIR" >&2
  echo "bundle: build one first: memoria model install (or scripts/install-model.sh DIR)" >&2
  exit 1
fi
runtime=$model/$runtime_name
[[ -e $runtime ]] || runtime=${ORT_DYLIB_PATH:-}
if [[ -z $runtime || ! -e $runtime ]]; then
  echo "bundle: ONNX Runtime ($runtime_name) is neither in $model nor at \$ORT_DYLIB_PATH" >&2
  exit 1
fi

if [[ $(uname -s) == Linux ]]; then
  "$repo/scripts/install-desktop-deps.sh"
elif [[ ! -x $repo/ui/node_modules/.bin/tauri ]]; then
  (cd "$repo/ui" && npm ci --no-audit --no-fund --loglevel=error)
fi

# The resources: the model's files and the runtime under the name the engine looks for, as
# plain files (a package keeps no symbolic links to outside it). The engine's caches beside
# the model (dot files) are left out: it rebuilds them.
stage=$CARGO_TARGET_DIR/bundle-resources/model
rm -rf "$stage"
mkdir -p "$stage"
for f in "$model"/*; do
  name=$(basename "$f")
  case $name in
    libonnxruntime.so* | libonnxruntime*.dylib | onnxruntime.dll) continue ;;
  esac
  [[ -f $f ]] && cp -L "$f" "$stage/$name"
done
cp -L "$runtime" "$stage/$runtime_name"
echo "bundle: model from $model ($(du -sh "$stage" | cut -f1) with ONNX Runtime)"

conf=$CARGO_TARGET_DIR/bundle-resources/tauri.bundle.json
printf '{"bundle": {"resources": {"%s/*": "model/"}}}\n' "$stage" > "$conf"
"$repo/scripts/tauri.sh" build --no-bundle --config "$conf" ${args[@]+"${args[@]}"}
if [[ $(uname -s) == Linux ]]; then
  # The release profile keeps line tables for the CLI's backtraces; in the app's package they
  # would be most of its size. Symbols stay, so a crash report still names its functions.
  strip --strip-debug "$CARGO_TARGET_DIR/release/memoria-desktop"
fi
"$repo/scripts/tauri.sh" bundle --bundles "$bundles" --config "$conf" ${args[@]+"${args[@]}"}
if [[ $(uname -s) != Linux ]]; then
  find "$CARGO_TARGET_DIR" -maxdepth 5 -path '*/release/bundle/*' \( -name '*.dmg' -o -name '*.msi' -o -name '*.exe' -o -name '*.app' \) -print
  exit 0
fi

deb=$(ls -t "$CARGO_TARGET_DIR"/release/bundle/deb/*.deb | head -1)
rpm=$(ls -t "$CARGO_TARGET_DIR"/release/bundle/rpm/*.rpm | head -1)
ls -l "$deb" "$rpm"
du -h "$deb" "$rpm"

if ((check)); then
  out=$CARGO_TARGET_DIR/bundle-check
  rm -rf "$out"
  mkdir -p "$out/root"
  dpkg-deb -x "$deb" "$out/root"
  bin=$out/root/usr/bin/memoria-desktop
  [[ -f $out/root/usr/lib/Memoria/model/model.onnx && -f $out/root/usr/lib/Memoria/model/libonnxruntime.so ]] || {
    echo "bundle: the .deb has no model/ in usr/lib/Memoria" >&2
    exit 1
  }
  echo "bundle: checking $bin on an empty home"
  MEMORIA_E2E_APP=$bin xvfb-run -a -s "-screen 0 1280x800x24" \
    "${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}/e2e-venv/bin/python" \
    "$repo/tests/e2e/check_bundle.py" "$out/home"
fi
