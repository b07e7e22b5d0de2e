#!/bin/sh
# Configures (once) and builds a meson build folder.
#   build.sh [FOLDER [MESON_SETUP_ARGS...]]     default folder: build
set -eu
cd "$(dirname "$0")/../.."
dir="${1:-build}"
[ $# -gt 0 ] && shift
if [ ! -f "$dir/build.ninja" ]; then
  # CI builds the main tree with warnings as errors; the sanitizer build is exempt, since g++'s
  # flow analysis under -fsanitize reports false "maybe uninitialized" warnings in libstdc++.
  werror=""
  [ "${CI:-}" = true ] && [ "$dir" = build ] && werror="-Dwerror=true"
  meson setup "$dir" --wrap-mode=nodownload $werror "$@"
fi
ninja -C "$dir"
