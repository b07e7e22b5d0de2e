#!/bin/sh
# Configures (once; later calls re-apply the options given) and builds a meson build folder.
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
elif [ $# -gt 0 ]; then
  # An existing folder takes the options again (one configured by hand may differ).
  meson configure "$dir" "$@" >/dev/null
fi
ninja -C "$dir"
