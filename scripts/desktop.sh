#!/usr/bin/env bash
# Builds and starts the desktop app on this machine: installs the system packages, the npm
# packages and the embedding model it needs (each step skipped when already done), builds the
# app with its UI embedded, and starts it on your memory home ($MEMORIA_HOME, else
# ~/.local/share/memoria) with the model from scripts/install-model.sh.
#
# It builds a release binary: the app starts and searches fastest that way, and the first
# build is done once. MEMORIA_DESKTOP_DEBUG=1 builds the debug binary instead (the one the
# end-to-end tests use; it builds faster).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/memoria/target}
"$repo/scripts/install-desktop-deps.sh"
model=$("$repo/scripts/install-model.sh" | tail -1)
if [[ ${MEMORIA_DESKTOP_DEBUG:-} == 1 ]]; then
  "$repo/scripts/tauri.sh" build --debug --no-bundle
  bin=$CARGO_TARGET_DIR/debug/memoria-desktop
else
  "$repo/scripts/tauri.sh" build --no-bundle
  bin=$CARGO_TARGET_DIR/release/memoria-desktop
fi
echo "desktop: starting $bin"
MEMORIA_MODEL_DIR=${MEMORIA_MODEL_DIR:-$model} exec "$bin" "$@"
