#!/usr/bin/env bash
# Builds the desktop app's Linux packages offline: a .deb and an .rpm (release build), into
# $CARGO_TARGET_DIR/release/bundle/{deb,rpm}/. msi, dmg and AppImage are listed in
# src-tauri/tauri.conf.json for builds on their own platforms (AppImage's tooling downloads
# from the network, so it is not built here).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/memoria/target}
"$repo/scripts/install-desktop-deps.sh"
"$repo/scripts/tauri.sh" build --bundles deb,rpm "$@"
ls -l "$CARGO_TARGET_DIR"/release/bundle/deb/*.deb "$CARGO_TARGET_DIR"/release/bundle/rpm/*.rpm
