#!/usr/bin/env bash
# Runs every fuzz target for the given number of seconds (default 60) and prints, per target,
# the executions and the findings (crash-*, leak-*, timeout-*, oom-* reproducers).
#   tests/fuzz/run.sh [seconds] [build-dir]
# Builds build-fuzz with clang first if needed. New corpus entries go to build-fuzz/fuzz-work/,
# findings to build-fuzz/fuzz-findings/<target>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-60}"
build="${2:-build-fuzz}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -DHOSTPREP_FUZZ=ON -DHOSTPREP_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target hostprep_fuzzers >/dev/null
total_findings=0
printf '%-22s %12s %10s %9s\n' target executions exec/s findings
for src in tests/fuzz/fuzz_*.cpp; do
  target="$(basename "$src" .cpp)"
  name="${target#fuzz_}"
  work="$build/fuzz-work/$name"
  findings="$build/fuzz-findings/$name"
  mkdir -p "$work" "$findings"
  log="$build/fuzz-work/$name.log"
  set +e
  "$build/tests/fuzz/$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$work" "tests/fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  set -e
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  n="$(find "$findings" -type f | wc -l)"
  if [ "$rc" -ne 0 ] && [ "$n" -eq 0 ]; then n=1; fi
  total_findings=$((total_findings + n))
  printf '%-22s %12s %10s %9s\n' "$name" "${execs:-?}" "${rate:-?}" "$n"
  if [ "$n" -ne 0 ]; then tail -20 "$log" | sed 's/^/    /'; fi
done
echo "findings: $total_findings"
[ "$total_findings" -eq 0 ]
