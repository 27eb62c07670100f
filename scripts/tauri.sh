#!/usr/bin/env bash
# The Tauri CLI (from ui/node_modules, installed by scripts/install-desktop-deps.sh), run from
# the repository root so it finds src-tauri/ and builds into the shared CARGO_TARGET_DIR.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/memoria/target}
cli=$repo/ui/node_modules/.bin/tauri
[[ -x $cli ]] || { echo "tauri.sh: run scripts/install-desktop-deps.sh first" >&2; exit 1; }
cd "$repo"
exec "$cli" "$@"
