#!/bin/sh
# examples/systemd/openlaked.service is a valid unit: systemd-analyze verify accepts it, with
# ExecStart pointed at the openlaked just built. Exit 77 (skipped) without systemd-analyze.
#   systemd_unit_check.sh UNIT OPENLAKED
set -eu
unit=$1
openlaked=$2
command -v systemd-analyze >/dev/null 2>&1 || { echo "no systemd-analyze: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s#/usr/local/bin/openlaked#$openlaked#" "$unit" > "$dir/openlaked.service"
out=$(systemd-analyze verify "$dir/openlaked.service" 2>&1) || { echo "$out"; exit 1; }
# verify also prints warnings it does not fail on: none is acceptable here.
if [ -n "$out" ]; then echo "$out"; exit 1; fi
echo "openlaked.service: verified"
