#!/bin/bash
# Runs the fuzz targets of tests/fuzz with libFuzzer (docs/fuzzing.md).
#   fuzz.sh [SECONDS [TARGET...]]    default: 600 s each, every target; two at a time
# Builds build-fuzz/ with clang, AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's
# coverage instrumentation. Each target starts from its committed corpus
# (tests/fuzz/corpus/TARGET) and grows a working corpus in build-fuzz/corpus/TARGET, which is
# kept between runs; a crash leaves its input in build-fuzz/findings/TARGET/. The summary line
# of each target (executions, coverage, features, corpus) goes to build-fuzz/summary.txt.
# OPENLAKE_FUZZ_JOBS=N runs N targets at once.
set -eu
cd "$(dirname "$0")/../.."
seconds="${1:-600}"
[ $# -gt 0 ] && shift
all="http_request s3_headers xml_bodies rpc_frame store_records config_toml rpc_service s3_server"
targets="${*:-$all}"
jobs="${OPENLAKE_FUZZ_JOBS:-2}"

if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-fuzz --wrap-mode=nodownload -Dfuzzing=true \
    -Dbench=false -Dpython=disabled -Db_sanitize=address,undefined -Db_lundef=false \
    -Doptimization=1 -Dcpp_args=-fsanitize=fuzzer-no-link
fi
names=""
for t in $targets; do names="$names tests/fuzz_$t"; done
# shellcheck disable=SC2086
ninja -C build-fuzz $names

run_one() {
  t="$1"
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/findings/$t"
  log="build-fuzz/fuzz-$t.log"
  # -timeout: an input that takes 30 s is a hang; -rss_limit_mb: the servers' slabs included.
  set +e
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "build-fuzz/tests/fuzz_$t" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
    -max_len=8192 -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$t/" \
    "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" > "$log" 2>&1
  rc=$?
  set -e
  # The last status line ("#N DONE cov: C ft: F corp: K/..."), and the run's total.
  status=$(grep -E '^#[0-9]+' "$log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "$t rc=$rc execs=${execs:-?} $status" >> build-fuzz/summary.txt
  echo "$t rc=$rc execs=${execs:-?} $status"
}

: > build-fuzz/summary.txt
running=0
for t in $targets; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
if grep -q 'rc=[1-9]' build-fuzz/summary.txt; then
  echo "fuzz: findings in build-fuzz/findings/ (see build-fuzz/fuzz-TARGET.log)" >&2
  exit 1
fi
