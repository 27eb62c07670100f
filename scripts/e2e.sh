#!/usr/bin/env bash
# The desktop app's end-to-end suite: builds the app's debug binary with the UI embedded,
# the `memoria` CLI and the `memoria-sync` server, then drives the app under Xvfb
# (tests/e2e/run.sh). Screenshots go to $CARGO_TARGET_DIR/e2e-shots/. Arguments go to pytest.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/memoria/target}
"$repo/scripts/install-desktop-deps.sh"
# The workspace build, with the features the workspace tests build: a no-op after them.
(cd "$repo" && cargo build --workspace --locked --bins)
"$repo/scripts/tauri.sh" build --debug --no-bundle
xvfb-run -a -s "-screen 0 1280x800x24" bash "$repo/tests/e2e/run.sh" "$@"
