#!/usr/bin/env bash
# CTest for tests/device/readonly.sh on a fixture host (never this machine's /):
#   readonly_test.sh HOSTPREP PREFLIGHT_FIXTURE
# The guard refuses every command line that could write; a run on an Intel host tree with two
# A10s on nvidia saves every output, check-node agrees with the status it was made from, and no
# driver changed.
set -uo pipefail
HOSTPREP=${1:?hostprep binary}; MAKE_FIXTURE=${2:?preflight_fixture binary}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0; passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# 1. The guard.
. "$HERE/readonly-guard.sh"
for cmd in "prepare --mode vm-passthrough" "prepare --mode container --force" "status --write /run/x.json" \
           "status --write=/run/x.json" "agent --once" "persist --mode vm-passthrough" "frobnicate"; do
  # shellcheck disable=SC2086
  if writes_to_host $cmd; then ok; else bad "guard lets 'hostprep $cmd' run"; fi
done
for cmd in "--version" "preflight --mode vm-vgpu" "status" "prepare --mode vm-vgpu --dry-run" \
           "check-node n.json --status s.json"; do
  # shellcheck disable=SC2086
  if writes_to_host $cmd; then bad "guard refuses read-only 'hostprep $cmd'"; else ok; fi
done

# 2. A run on a fixture host.
"$MAKE_FIXTURE" "$HERE/../fixtures/preflight-intel" "$T/root" 2 0 >/dev/null || { echo "fixture failed"; exit 1; }
mkdir -p "$T/root/proc/sys/kernel" && echo gpu-test >"$T/root/proc/sys/kernel/hostname"
bash "$HERE/readonly.sh" --hostprep "$HOSTPREP" --root "$T/root" "$T/out" >"$T/log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then ok; else bad "readonly.sh exited $rc: $(cat "$T/log")"; fi
for step in preflight-container preflight-vm-passthrough preflight-vm-vgpu status prepare-container \
            prepare-vm-passthrough prepare-vm-vgpu check-node; do
  if jq -e . "$T/out/$step.json" >/dev/null 2>&1; then ok; else bad "$step.json is not JSON"; fi
  [ -f "$T/out/$step.rc" ] && ok || bad "$step.rc missing"
done
[ "$(cat "$T/out/check-node.rc" 2>/dev/null)" = 0 ] && ok ||
  bad "check-node disagrees with the status it was made from: $(cat "$T/out/check-node.stderr" 2>/dev/null)"
[ "$(jq -r '.checks | length' "$T/out/preflight-vm-passthrough.json" 2>/dev/null)" -gt 5 ] && ok ||
  bad "preflight output has no checks"
[ "$(wc -l <"$T/out/summary.tsv")" -eq 10 ] && ok || bad "summary.tsv: $(cat "$T/out/summary.tsv")"
cmp -s "$T/out/drivers-before.txt" "$T/out/drivers-after.txt" && ok || bad "drivers changed"
grep -q ' nvidia$' "$T/out/drivers-before.txt" && ok || bad "no GPU on nvidia in drivers-before.txt"

# 3. Bad arguments: an existing non-empty result folder is never reused; /sys is refused.
bash "$HERE/readonly.sh" --hostprep "$HOSTPREP" --root "$T/root" "$T/out" >"$T/log2" 2>&1
[ $? -eq 2 ] && grep -q 'is not empty' "$T/log2" && ok || bad "a non-empty OUT_DIR was not refused"
bash "$HERE/readonly.sh" --hostprep "$HOSTPREP" --root "$T/root" /sys/x >"$T/log3" 2>&1
[ $? -eq 2 ] && grep -q 'refusing to write results under' "$T/log3" && ok || bad "/sys was not refused"

echo "readonly: $passes passed, $fails failed"
[ $fails -eq 0 ]
