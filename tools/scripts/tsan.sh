#!/bin/sh
# The unit and integration suites under ThreadSanitizer (docs/testing.md): builds build-tsan/
# with clang and -fsanitize=thread, then runs both suites; any data race fails the test it
# shows up in (halt_on_error). Extra arguments go to `meson test` (say, a test's name).
# Not part of `make test`: on CI's two cores the build and run take about 25 minutes more than
# its time allows (docs/testing.md has the figures).
set -eu
cd "$(dirname "$0")/../.."
tools/scripts/deps.sh
CC=clang CXX=clang++ tools/scripts/build.sh build-tsan -Dbench=false -Dpython=disabled \
  -Db_sanitize=thread -Db_lundef=false -Doptimization=1
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4" \
  meson test -C build-tsan --suite unit --suite integration --print-errorlogs --num-processes 2 \
  --timeout-multiplier 4 "$@"
