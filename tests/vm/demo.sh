#!/bin/bash
# The main job, shown end to end: build hostprep (if needed), boot a real Debian kernel under QEMU
# with stand-in GPUs, and run hostprep preflight / prepare / status inside the guest.
#
#   bash tests/vm/demo.sh [HOSTPREP_BINARY] [--no-iommu]
#
# --no-iommu boots without intel_iommu=on (preflight should then say what is missing).
# Nothing here touches the machine it runs on: every bind/unbind happens inside the guest.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
HOSTPREP=
VMARGS=()
for a in "$@"; do
    case $a in
        --no-iommu) VMARGS+=(--no-iommu) ;;
        *) HOSTPREP=$a ;;
    esac
done
# Idempotent and quick when everything is there; on a fresh machine it installs the build's
# -dev libraries and QEMU (a machine may have cmake and still lack libkmod-dev).
bash "$TOP/.ci/install-deps" >&2
if [ -z "$HOSTPREP" ]; then
    HOSTPREP=$TOP/build/hostprep
    if [ ! -x "$HOSTPREP" ]; then
        echo "demo: building hostprep" >&2
        cmake -S "$TOP" -B "$TOP/build" >/dev/null
        cmake --build "$TOP/build" -j"$(nproc)" --target hostprep >&2
    fi
fi
INITRD=$("$HERE/build-initramfs.sh" "$(realpath "$HOSTPREP")")
# Kernel messages stay off the console (loglevel=4 in run-vm.sh); the demo's own output is
# everything after "HPVM: booted".
"$HERE/run-vm.sh" --initrd "$INITRD" --suite demo --no-check "${VMARGS[@]}" \
    | tr -d '\r' | sed -n '/^HPVM: booted/,/^HPVM: suite exited/p'
