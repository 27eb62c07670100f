#!/usr/bin/env bash
# Installs what the test suite needs beyond cargo, idempotently, into a cache outside the clone:
#   $MEMORIA_TOOLS_DIR/py-venv   Python venv with python-frontmatter (the Obsidian-compatibility
#                                check), the official MCP Python SDK (a real MCP client for the MCP
#                                tests) and Hugging Face tokenizers (the reference for our e5
#                                tokenizer)
# Re-running it does nothing once everything is in place.
set -euo pipefail
tools=${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}
mkdir -p "$tools"
venv=$tools/py-venv
want="python-frontmatter==1.1.0 mcp==1.26.0 tokenizers==0.22.1"
stamp=$venv/.memoria-installed
if [[ -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
  echo "test tools: already installed in $venv"
else
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check $want
  echo "$want" > "$stamp"
  echo "test tools: installed in $venv"
fi
