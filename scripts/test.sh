#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a warm one: installs what the tests need
# (idempotent, cached outside the clone), then runs every test in the workspace, the UI's
# checks and tests, and the desktop app's end-to-end suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/memoria/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

scripts/install-test-tools.sh
scripts/install-moto.sh
scripts/install-desktop-deps.sh
# The UI's own checks and tests; its build is embedded in the desktop app, so cargo needs it.
(cd ui && npm run check && npm run lint && npm test && npm run build)
# The real embedding model for the recall tests (tests/it/recall_model.rs), and the f32 model it
# is built from (they compare the two), cached outside the clone.
models=$HOME/.cache/memoria/models
export MEMORIA_TEST_BASE_MODEL_DIR=${MEMORIA_TEST_BASE_MODEL_DIR:-$models/e5-small}
MEMORIA_TEST_MODEL_DIR=$(MEMORIA_MODEL_DIR=${MEMORIA_TEST_MODEL_DIR:-$models/e5-small-int8} \
  MEMORIA_MODEL_BASE_DIR=$MEMORIA_TEST_BASE_MODEL_DIR scripts/install-model.sh | tail -1)
export MEMORIA_TEST_MODEL_DIR
export MEMORIA_TEST_PYTHON=${MEMORIA_TEST_PYTHON:-${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}/py-venv/bin/python}
export MEMORIA_TEST_PYTHON_MCP2=${MEMORIA_TEST_PYTHON_MCP2:-${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}/py-venv-mcp2/bin/python}
# llama.cpp's OpenAI-compatible server with SmolLM2-135M, for the model-capture tests.
export MEMORIA_TEST_LLAMA_PYTHON=${MEMORIA_TEST_LLAMA_PYTHON:-${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}/llama-venv/bin/python}

if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
else
  cargo test --workspace --locked --no-fail-fast
fi
# The desktop app end to end, under Xvfb (reuses the binaries built above).
scripts/e2e.sh
