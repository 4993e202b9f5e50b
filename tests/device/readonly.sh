#!/usr/bin/env bash
# Read-only checks of hostprep on a real GPU host: what it sees, what it would do, nothing done.
#
#   tests/device/readonly.sh [--hostprep PATH] [--root DIR] OUT_DIR
#
# Runs, all with --output json, and saves each command's stdout, stderr and exit code under
# OUT_DIR (created; it must be empty or absent):
#   version           hostprep --version
#   preflight-MODE    hostprep preflight --mode MODE            (container, vm-passthrough, vm-vgpu)
#   status            hostprep status                           (never --write)
#   prepare-MODE      hostprep prepare --mode MODE --dry-run    (each mode; a dry run only reads)
#   check-node        hostprep check-node NODE --status status.json, where NODE is a Node document
#                     made from the status (name, workload label = actualMode, allocatable =
#                     advertised): does what the node would advertise agree with its mode?
# plus host.txt (kernel, command line, lspci -nnk where lspci exists), drivers-before.txt and
# drivers-after.txt (every PCI function's driver link) and summary.tsv (step, exit code, command).
#
# Safety: every hostprep command goes through run_readonly, which refuses anything that writes
# to the host (prepare without --dry-run, status --write, agent, persist) before it starts, and
# the drivers of every PCI function are compared before and after. Exit: 0 every step ran (a
# preflight FAIL is data, not an error), 1 a step ended with a usage error or crashed, 2 bad
# arguments, 3 a driver changed during the run (which would be a hostprep bug: report it).
# --root is for testing this script on a fixture tree; on a real host leave it at /.
set -uo pipefail

HOSTPREP=${HOSTPREP:-hostprep}
ROOT=/
usage() { echo "usage: readonly.sh [--hostprep PATH] [--root DIR] OUT_DIR" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --hostprep) HOSTPREP=${2:?--hostprep needs a path}; shift 2 ;;
    --root) ROOT=${2:?--root needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "readonly.sh: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || usage
OUT=$1
command -v "$HOSTPREP" >/dev/null 2>&1 || {
  echo "readonly.sh: hostprep binary '$HOSTPREP' not found: pass --hostprep PATH" >&2; exit 2; }
[ -d "$ROOT/sys/bus/pci/devices" ] || {
  echo "readonly.sh: $ROOT has no sys/bus/pci/devices: is --root a host tree?" >&2; exit 2; }
case $(realpath -m "$OUT") in
  /sys|/sys/*|/proc|/proc/*|/dev|/dev/*|/run|/run/*)
    echo "readonly.sh: refusing to write results under $OUT: pick a directory of your own" >&2
    exit 2 ;;
esac
if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  echo "readonly.sh: $OUT is not empty: give a new directory, earlier results stay as they are" >&2
  exit 2
fi
mkdir -p "$OUT" || exit 2

MODES=(container vm-passthrough vm-vgpu)
FAILED=0
printf 'step\trc\tcommand\n' >"$OUT/summary.tsv"

# writes_to_host: the one list of what may run (readonly-guard.sh, tested on its own).
. "$(dirname "$0")/readonly-guard.sh"

# run_readonly STEP ARGS...: hostprep ARGS with the global options; stdout to STEP.json (or .txt
# for --version), stderr to STEP.stderr, the exit code to STEP.rc and summary.tsv.
run_readonly() {
  local step=$1; shift
  if writes_to_host "$@"; then
    echo "readonly.sh: refusing to run 'hostprep $*': it could write to the host" >&2
    exit 2
  fi
  local ext=json; [ "$1" = --version ] && ext=txt
  local args=("$@")
  [ "$1" = --version ] || args+=(--root "$ROOT" --output json)
  "$HOSTPREP" "${args[@]}" >"$OUT/$step.$ext" 2>"$OUT/$step.stderr" </dev/null
  local rc=$?
  echo "$rc" >"$OUT/$step.rc"
  printf '%s\t%s\thostprep %s\n' "$step" "$rc" "${args[*]}" >>"$OUT/summary.tsv"
  # 0 and 1 are answers (1: a check failed, a refusal, an error finding); 2 is a usage error,
  # 3 a refusal by prepare; anything above (or a signal) is a crash.
  if [ "$rc" -eq 2 ] || [ "$rc" -gt 3 ]; then
    echo "readonly.sh: $step exited $rc (see $OUT/$step.stderr)" >&2
    FAILED=1
  fi
}

drivers() {
  local d
  for d in "$ROOT"/sys/bus/pci/devices/*; do
    printf '%s %s\n' "${d##*/}" "$(basename "$(readlink "$d/driver" 2>/dev/null)" 2>/dev/null)"
  done
}

{
  echo "kernel: $(cat "$ROOT/proc/sys/kernel/osrelease" 2>/dev/null || uname -r)"
  echo "cmdline: $(cat "$ROOT/proc/cmdline" 2>/dev/null)"
  if [ "$ROOT" = / ] && command -v lspci >/dev/null; then echo; lspci -nnk; fi
} >"$OUT/host.txt"
drivers >"$OUT/drivers-before.txt"

run_readonly version --version
for m in "${MODES[@]}"; do run_readonly "preflight-$m" preflight --mode "$m"; done
run_readonly status status
for m in "${MODES[@]}"; do run_readonly "prepare-$m" prepare --mode "$m" --dry-run; done

# check-node on a Node document made from the status: label = actualMode, allocatable =
# advertised. Needs jq; without it the step is recorded as skipped.
if command -v jq >/dev/null && jq -e .nodeName "$OUT/status.json" >/dev/null 2>&1; then
  jq '{apiVersion: "v1", kind: "Node",
       metadata: {name: .nodeName, labels: {"nvidia.com/gpu.workload.config": .actualMode}},
       status: {allocatable: (.advertised | map_values(tostring))}}' \
    "$OUT/status.json" >"$OUT/node.json"
  run_readonly check-node check-node "$OUT/node.json" --status "$OUT/status.json"
else
  printf 'check-node\tskipped\tno jq, or no status document\n' >>"$OUT/summary.tsv"
fi

drivers >"$OUT/drivers-after.txt"
if ! cmp -s "$OUT/drivers-before.txt" "$OUT/drivers-after.txt"; then
  echo "readonly.sh: a PCI function changed driver during a read-only run:" >&2
  diff "$OUT/drivers-before.txt" "$OUT/drivers-after.txt" >&2
  exit 3
fi
echo "readonly.sh: results in $OUT (summary.tsv)"
exit "$FAILED"
