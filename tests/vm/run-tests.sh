#!/bin/bash
# Entry point of the VM suite (CTest: vm.integration).
#
#   tests/vm/run-tests.sh [HOSTPREP_BINARY]
#
# Fetches the guest kernel (cached), builds standin.ko/mtty.ko/helpers and the initramfs, boots
# the QEMU topology and fails unless the guest reports "N passed, 0 failed" and powers off cleanly.
# Without a binary only the kernel/standin/vfio/SR-IOV/mdev tests run.
# Environment: HOSTPREP_VM_CACHE (downloads, default ~/.cache/hostprep-vm), HOSTPREP_VM_WORK
# (build outputs), HOSTPREP_VM_TIMEOUT (seconds for the whole boot, default 600 for the suite),
# HOSTPREP_VM_TESTS (run only the tests whose name contains it, e.g. vgpu; for development).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
HOSTPREP=${1:-}
if [ -n "$HOSTPREP" ]; then
    HOSTPREP=$(realpath "$HOSTPREP")
fi
command -v qemu-system-x86_64 >/dev/null || { echo "run-tests: qemu-system-x86_64 not installed" >&2; exit 1; }
t0=$(date +%s)
INITRD=$("$HERE/build-initramfs.sh" $HOSTPREP)
t1=$(date +%s)
echo "run-tests: initramfs ready in $((t1 - t0))s" >&2
rc=0
ONLY=()
[ -z "${HOSTPREP_VM_TESTS:-}" ] || ONLY=(--append "hp.tests=$HOSTPREP_VM_TESTS")
"$HERE/run-vm.sh" --initrd "$INITRD" --suite tests --timeout "${HOSTPREP_VM_TIMEOUT:-600}" "${ONLY[@]}" || rc=$?
# Second boot, IOMMU off: preflight and prepare must notice (hostprep tests only).
if [ -n "$HOSTPREP" ]; then
    "$HERE/run-vm.sh" --initrd "$INITRD" --suite noiommu --iommu off --timeout 120 "${ONLY[@]}" || rc=$?
fi
echo "run-tests: total $(( $(date +%s) - t0 ))s, exit $rc" >&2
exit $rc
