#!/usr/bin/env bash
# Installs moto's S3 server (the only S3 server we found that honours conditional writes under
# races, see docs/sync-server.md) into a venv the sync-server tests use. Idempotent: a second run
# with the right version installed does nothing.
set -euo pipefail

MOTO_VERSION="5.2.5"
TOOLS_DIR="${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}"
VENV="$TOOLS_DIR/moto-venv"

if [ -x "$VENV/bin/moto_server" ] &&
    "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('moto') != '$MOTO_VERSION')" 2>/dev/null; then
    echo "moto $MOTO_VERSION already installed: $VENV/bin/moto_server"
    exit 0
fi

mkdir -p "$TOOLS_DIR"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION"
echo "moto $MOTO_VERSION installed: $VENV/bin/moto_server"
