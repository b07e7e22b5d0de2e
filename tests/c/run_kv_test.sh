#!/bin/sh
# Runs the C API test (kv_test.c) against a real openlaked on a loopback port:
#   run_kv_test.sh OPENLAKED TEST_C_KV
set -eu
openlaked=$1
test_bin=$2
dir=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port)
closed=$(free_port)
cat > "$dir/openlake.toml" <<CFG
mode = "kv"
rpc_addr = "127.0.0.1:$port"
kv_socket = "$dir/kv.sock"
[kv_slab]
capacity_gb = 0.0625
segment_mb = 4
reserve_ttl_secs = 60
CFG
"$openlaked" --config "$dir/openlake.toml" > "$dir/openlaked.out" 2>&1 &
pid=$!
i=0
until grep -q "KV pool:" "$dir/openlaked.out"; do
  i=$((i + 1))
  if [ $i -gt 200 ] || ! kill -0 "$pid" 2>/dev/null; then
    echo "openlaked did not start:"; cat "$dir/openlaked.out"; exit 1
  fi
  sleep 0.1
done
"$test_bin" "127.0.0.1:$port" "127.0.0.1:$closed"
# The daemon survived everything the test sent it.
kill -0 "$pid" || { echo "openlaked died:"; cat "$dir/openlaked.out"; exit 1; }
