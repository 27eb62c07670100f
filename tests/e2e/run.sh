#!/usr/bin/env bash
# Runs the end-to-end suite against the app's debug build. Needs a display: run it as
#   xvfb-run -a -s "-screen 0 1280x800x24" bash tests/e2e/run.sh [pytest args]
# scripts/install-desktop-deps.sh installs tauri-driver and the venv; scripts/e2e.sh builds
# the binaries and runs this under Xvfb.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$HOME/.cache/memoria/target}
tools=${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}
export MEMORIA_E2E_APP=${MEMORIA_E2E_APP:-$target/debug/memoria-desktop}
export MEMORIA_E2E_CLI=${MEMORIA_E2E_CLI:-$target/debug/memoria}
export MEMORIA_E2E_SYNC=${MEMORIA_E2E_SYNC:-$target/debug/memoria-sync}
export MEMORIA_E2E_DRIVER=${MEMORIA_E2E_DRIVER:-$tools/cargo/bin/tauri-driver}
export MEMORIA_E2E_OUT=${MEMORIA_E2E_OUT:-$target/e2e-shots}
for bin in "$MEMORIA_E2E_APP" "$MEMORIA_E2E_CLI" "$MEMORIA_E2E_SYNC" "$MEMORIA_E2E_DRIVER"; do
  [[ -x $bin ]] || { echo "e2e: $bin is missing (scripts/e2e.sh builds it)" >&2; exit 1; }
done
echo "e2e: screenshots in $MEMORIA_E2E_OUT"
cd "$repo/tests/e2e"
exec "$tools/e2e-venv/bin/python" -m pytest -p no:cacheprovider -v "$@"
