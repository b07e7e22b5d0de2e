#!/bin/sh
# `make run`: install what is missing, build, and start openlaked on its embedded default
# (KV pool on 127.0.0.1:9400, S3 on 127.0.0.1:9000 over ./data; Ctrl-C stops it). Extra
# arguments go to openlaked.
set -eu
cd "$(dirname "$0")/../.."
tools/scripts/deps.sh
tools/scripts/build.sh build
exec ./build/tools/openlaked/openlaked "$@"
