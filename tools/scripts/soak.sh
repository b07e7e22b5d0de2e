#!/bin/sh
# Soak test (docs/soak.md): builds build/, then runs tools/scripts/soak.py against one
# openlaked: mixed S3 and KV load with faults (clients killed, drive folders removed and
# restored, the daemon killed -9 and restarted) for SECONDS (default 1800), then checks that
# nothing acknowledged was lost and prints a summary. Exit status 0 when nothing was.
#   soak.sh [SECONDS] [soak.py options...]
set -eu
cd "$(dirname "$0")/../.."
seconds="${1:-1800}"
[ $# -gt 0 ] && shift
tools/scripts/build.sh build >/dev/null
PYTHONPATH="$PWD/build/bindings/python${PYTHONPATH:+:$PYTHONPATH}" \
  exec /usr/bin/python3 tools/scripts/soak.py --seconds "$seconds" \
  --openlaked build/tools/openlaked/openlaked "$@"
