#!/usr/bin/env bash
# Installs what the desktop app needs to build, run and be tested end to end, idempotently:
#   Debian packages  WebKitGTK 4.1 and the build tools Tauri links against, Xvfb, the WebKit
#                    WebDriver, ImageMagick, a font for Chinese (docs/desktop.md lists them)
#   ui/node_modules  `npm ci` (skipped while package-lock.json is unchanged)
#   tauri-driver     into $MEMORIA_TOOLS_DIR/cargo/bin (the WebDriver bridge the e2e tests use)
#   e2e-venv         $MEMORIA_TOOLS_DIR/e2e-venv with pytest and selenium
# Each step checks first and does nothing when its work is already done.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=${MEMORIA_TOOLS_DIR:-$HOME/.cache/memoria/tools}
mkdir -p "$tools"

pkgs="libwebkit2gtk-4.1-dev build-essential file libssl-dev libayatana-appindicator3-dev
  librsvg2-dev libxdo-dev pkg-config xvfb webkit2gtk-driver xauth imagemagick fonts-noto-cjk"
missing=()
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if command -v apt-get >/dev/null; then
    sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
    echo "desktop deps: installed ${missing[*]}"
  else
    echo "desktop deps: install these packages with your package manager: ${missing[*]}" >&2
    exit 1
  fi
fi

if [[ -f $repo/ui/package.json ]]; then
  lock=$repo/ui/package-lock.json
  stamp=$repo/ui/node_modules/.memoria-installed
  want=$( (cat "$lock" 2>/dev/null || cat "$repo/ui/package.json") | sha256sum | cut -d' ' -f1)
  if [[ ! -f $stamp || "$(cat "$stamp")" != "$want" ]]; then
    if [[ -f $lock ]]; then
      (cd "$repo/ui" && npm ci --no-audit --no-fund --loglevel=error)
    else
      (cd "$repo/ui" && npm install --no-audit --no-fund --loglevel=error)
    fi
    echo "$want" > "$stamp"
    echo "desktop deps: installed ui/node_modules"
  fi
fi

driver_version=2.1.0
driver=$tools/cargo/bin/tauri-driver
if [[ ! -x $driver || "$(cat "$driver.version" 2>/dev/null)" != "$driver_version" ]]; then
  # Its own target directory: the workspace's is not the place for a tool's build.
  CARGO_TARGET_DIR=$tools/cargo-target cargo install --quiet --locked \
    --root "$tools/cargo" tauri-driver --version "$driver_version"
  rm -rf "$tools/cargo-target"
  echo "$driver_version" > "$driver.version"
  echo "desktop deps: installed $driver"
fi

venv=$tools/e2e-venv
want="pytest==8.4.2 selenium==4.51.0"
if [[ ! -f $venv/.memoria-installed || "$(cat "$venv/.memoria-installed")" != "$want" ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check $want
  echo "$want" > "$venv/.memoria-installed"
  echo "desktop deps: installed $venv"
fi
