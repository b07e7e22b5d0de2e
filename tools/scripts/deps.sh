#!/bin/sh
# Installs the Debian 12 packages OpenLake builds, tests and benchmarks with, when any is
# missing. Needs root (or sudo). Set OPENLAKE_SKIP_DEPS=1 to skip the check entirely.
set -eu

[ "${OPENLAKE_SKIP_DEPS:-0}" = 1 ] && exit 0

PACKAGES="
  g++ clang libclang-rt-14-dev pkg-config meson ninja-build
  liburing-dev libisal-dev libabsl-dev libprotobuf-dev protobuf-compiler
  libtomlplusplus-dev libssl-dev libcli11-dev catch2 libpugixml-dev
  libucx-dev ucx-utils libibverbs-dev iproute2 nftables
  pybind11-dev python3-dev python3-venv python3-pip python3-mesonpy
  python3-pytest python3-numpy python3-torch python3-tqdm
  fio redis-server wrk nginx-light
  awscli python3-boto3 prometheus
  golang-go python3-yaml python3-kubernetes
"

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

echo "openlake: installing missing Debian packages:$missing"
if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "openlake: need root (or sudo) to install:$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
