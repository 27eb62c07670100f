#!/usr/bin/env bash
# The desktop app's benchmarks (docs/BENCHMARKS.md): app start to notes listed at 1,000 notes,
# keystroke to results painted at 10,000 notes, and the app's memory with the model loaded,
# measured on the real app through WebDriver under Xvfb (tests/e2e/bench_app.py says how).
# It builds nothing: it runs the release binary (scripts/bundle.sh or
# `scripts/tauri.sh build --no-bundle` builds it) unless MEMORIA_E2E_APP names another, and the
# `memoria` CLI from the same target folder to fill the homes. The model for the memory figure
# is MEMORIA_BENCH_MODEL_DIR, else MEMORIA_TEST_MODEL_DIR. Arguments go to bench_app.py
# (e.g. --only keys, --starts 3); results land in $CARGO_TARGET_DIR/bench-app/results.json.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target=${CARGO_TARGET_DIR:-$HOME/.cache/memoria/target}
tools=${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}
export MEMORIA_E2E_APP=${MEMORIA_E2E_APP:-$target/release/memoria-desktop}
if [[ -z ${MEMORIA_E2E_CLI:-} ]]; then
  MEMORIA_E2E_CLI=$target/release/memoria
  [[ -x $MEMORIA_E2E_CLI ]] || MEMORIA_E2E_CLI=$target/debug/memoria
fi
export MEMORIA_E2E_CLI
export MEMORIA_E2E_DRIVER=${MEMORIA_E2E_DRIVER:-$tools/cargo/bin/tauri-driver}
for bin in "$MEMORIA_E2E_APP" "$MEMORIA_E2E_CLI" "$MEMORIA_E2E_DRIVER"; do
  [[ -x $bin ]] || { echo "bench-app: $bin is missing" >&2; exit 1; }
done
model=${MEMORIA_BENCH_MODEL_DIR:-${MEMORIA_TEST_MODEL_DIR:-$HOME/.cache/memoria/models/e5-small-int8}}
model_args=()
[[ -f $model/model.onnx ]] && model_args=(--model "$model")
work=$target/bench-app
echo "bench-app: $MEMORIA_E2E_APP, work folder $work"
exec xvfb-run -a -s "-screen 0 1280x800x24" "$tools/e2e-venv/bin/python" \
  "$repo/tests/e2e/bench_app.py" "$work" "${model_args[@]}" "$@"
