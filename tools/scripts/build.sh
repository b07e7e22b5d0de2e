#!/bin/sh
# Configures (once) and builds a meson build folder.
#   build.sh [FOLDER [MESON_SETUP_ARGS...]]     default folder: build
set -eu
cd "$(dirname "$0")/../.."
dir="${1:-build}"
[ $# -gt 0 ] && shift
if [ ! -f "$dir/build.ninja" ]; then
  werror=""
  [ "${CI:-}" = true ] && werror="-Dwerror=true"
  meson setup "$dir" --wrap-mode=nodownload $werror "$@"
fi
ninja -C "$dir"
