#!/bin/bash
# The GPU checks, run from a bundle made by tools/scripts/gpu_bundle.sh, on the GPU machine:
#   bash gpucarry/gpu_checks.sh            # STAGES=crc,bench,ttft,pytest by default
# Libraries the machine lacks are taken from the bundle; each stage has its own time limit
# (CRC_T, BENCH_T, TTFT_T, PYTEST_T seconds), BENCH_ARGS and TTFT_ARGS pass options on, and each
# stage's log lands in $OUT. Stage crc: the GPU checksum against the host's (PASS/FAIL) and its
# speed over 1 GiB (tests/python/gpu_crc_check.py; exit 77, a skip, without it).
cd "$(dirname "$0")/.."
R=$PWD
OUT=${OUT:-$R/gpu-out}
STAGES=${STAGES:-crc,bench,ttft,pytest}
mkdir -p "$OUT" /tmp/openlake-gpu-lib
for f in gpucarry/lib/*; do
  n=$(basename "$f")
  ldconfig -p | grep -q "$n " || cp "$f" /tmp/openlake-gpu-lib/
done
export LD_LIBRARY_PATH=/tmp/openlake-gpu-lib PYTHONPATH=$R/gpucarry/py PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
chmod +x gpucarry/openlaked
{
  echo "== env"; date
  nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv
  nproc; free -g | head -2; grep PRETTY /etc/os-release
  ldd gpucarry/openlaked | grep "not found"
  python3 -c "import torch, openlake_client as ol; print('torch', torch.__version__, 'openlake', ol.version())"
} 2>&1 | tee "$OUT/env.log"
has() { case ",$STAGES," in *",$1,"*) return 0 ;; esac; return 1; }
if has crc; then
  echo "== crc (GPU checksum vs ISA-L)"
  timeout "${CRC_T:-120}" python3 tests/python/gpu_crc_check.py 2>&1 | tee "$OUT/crc.log"
  echo "crc exit ${PIPESTATUS[0]}" | tee -a "$OUT/crc.log"
fi
if has bench; then
  echo "== gpu_kv_bench"
  timeout "${BENCH_T:-120}" python3 bench/gpu_kv_bench.py --json --openlaked gpucarry/openlaked ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
fi
if has ttft; then
  echo "== ttft"
  timeout "${TTFT_T:-200}" python3 examples/ttft_hit_vs_miss.py --json --openlaked gpucarry/openlaked ${TTFT_ARGS:-} 2>&1 | tee "$OUT/ttft.log"
fi
if has pytest; then
  echo "== pytest (OPENLAKE_TEST_DEVICE=cuda)"
  OPENLAKED=$R/gpucarry/openlaked OPENLAKE_TEST_DEVICE=cuda timeout "${PYTEST_T:-120}" \
    python3 -m pytest -q -p no:cacheprovider -x tests/python/test_connector.py tests/python/test_client.py 2>&1 |
    tee "$OUT/pytest.log" | tail -30
fi
pkill -f gpucarry/openlaked || true
echo "== done"; date
