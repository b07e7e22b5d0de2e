#!/bin/sh
# Suite hw: the cluster pool's pulls over UCX on an RDMA NIC (its rc and ud verbs transports),
# the device named in [rdma] dev_name as a user names it ("mlx5_0:1"). Runs the hidden [rdma]
# case of test_kv_cluster on the first active port under /sys/class/infiniband; exits 77 (a
# skip) where there is none.
#   kv_cluster_rdma.sh TEST_KV_CLUSTER
set -eu
test_bin=$1
for dev in /sys/class/infiniband/*; do
  [ -d "$dev/ports" ] || continue
  for port in "$dev"/ports/*; do
    if grep -q ACTIVE "$port/state" 2>/dev/null; then
      OPENLAKE_TEST_RDMA_DEVICE="$(basename "$dev"):$(basename "$port")"
      export OPENLAKE_TEST_RDMA_DEVICE
      echo "RDMA device: $OPENLAKE_TEST_RDMA_DEVICE"
      exec "$test_bin" "[rdma]"
    fi
  done
done
echo "no active RDMA port under /sys/class/infiniband: skipped"
exit 77
