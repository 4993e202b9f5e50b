#!/bin/bash
# Boot the test VM once and check what the guest reported on its serial console.
#
#   tests/vm/run-vm.sh [--initrd FILE] [--suite NAME] [--append "ARGS"] [--iommu on|default|off]
#                      [--no-iommu] [--timeout SECONDS] [--log FILE] [--no-check] [--disk IMAGE]
#                      [--bench-gpus N]
#
# --suite       guest script /tests/NAME.sh to run (default: tests)
# --append      extra kernel command-line arguments
# --iommu       on (default): "intel_iommu=on iommu=pt"; default: no IOMMU arguments at all
#               (Debian's 6.1 has CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF=y, so the IOMMU is
#               still on); off: "intel_iommu=off" (the DMAR table and the emulated IOMMU stay,
#               the kernel does not use them) -- for preflight checks that must notice
# --no-iommu    same as --iommu off
# --no-check    only boot and stream the console (for demos); exit status is QEMU's
# --disk        a raw disk image as virtio-blk at 00:0a.0 (the systemd flavour's root file
#               system); the rest of the topology is unchanged
# --bench-gpus  N more stand-in GPUs (edu) at 00:0b.0, 00:0c.0, ..., each in its own group, for
#               tests/bench/run's 8-GPU teardown only; the test suites' topology stays as it is
# Fails (exit 1) on: timeout/hang, kernel panic or oops, no "N passed, N failed" line, any FAIL.
# One exception, booted once more: a guest kernel that died on an int3 of its own code patching
# ("int3: 0000 [#1]", see below), a fault of QEMU's emulation, not of the guest or the test.
# The topology is documented in tests/vm/README.md; keep the two in sync.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ARGS=("$@")
ATTEMPT=${HOSTPREP_VM_ATTEMPT:-1}
CACHE=${HOSTPREP_VM_CACHE:-$HOME/.cache/hostprep-vm}
WORK=${HOSTPREP_VM_WORK:-$CACHE/work}
INITRD=$WORK/initramfs.cpio.gz
SUITE=tests
EXTRA=
IOMMU="intel_iommu=on iommu=pt"
TIMEOUT=${HOSTPREP_VM_TIMEOUT:-240}
LOG=
CHECK=1
DISK=()
DISK_FILE=
BENCH_GPUS=()
while [ $# -gt 0 ]; do
    case $1 in
        --initrd) INITRD=$2; shift 2 ;;
        --suite) SUITE=$2; shift 2 ;;
        --append) EXTRA="$EXTRA $2"; shift 2 ;;
        --no-iommu) IOMMU="intel_iommu=off"; shift ;;
        --iommu)
            case $2 in
                on) IOMMU="intel_iommu=on iommu=pt" ;;
                default) IOMMU="" ;;
                off) IOMMU="intel_iommu=off" ;;
                *) echo "run-vm: --iommu on|default|off" >&2; exit 2 ;;
            esac
            shift 2 ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --log) LOG=$2; shift 2 ;;
        --no-check) CHECK=0; shift ;;
        --disk) DISK_FILE=$2; DISK=(-drive "file=$2,if=none,id=hd0,format=raw,cache=unsafe"
                      -device virtio-blk-pci,drive=hd0,bus=pcie.0,addr=0a.0); shift 2 ;;
        --bench-gpus)
            [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -le 16 ] || { echo "run-vm: --bench-gpus 0..16" >&2; exit 2; }
            for ((i = 0; i < $2; i++)); do
                BENCH_GPUS+=(-device "edu,bus=pcie.0,addr=$(printf %02x $((0x0b + i))).0")
            done
            shift 2 ;;
        *) echo "run-vm: unknown argument $1" >&2; exit 2 ;;
    esac
done
ENV=$("$HERE/fetch.sh")
# shellcheck disable=SC1090
. "$ENV"
[ -n "$LOG" ] || LOG=$WORK/serial-$SUITE.log
mkdir -p "$(dirname "$LOG")"

# Topology (bus numbers as the guest enumerates them; see README.md):
#   00:02.0 e1000e                       own group, driver e1000e
#   00:03.0 edu                          own group           "edu A"
#   00:04.0 edu                          own group           "edu B"
#   00:05.0 pci-testdev                  own group, driverless
#   00:06.0 pcie-root-port rp1 -> 01:00.0 edu "edu C" + 01:00.1 ich9-intel-hda  (one group; the
#                                    audio function has the multi-function bit in its header
#                                    type too, as a GPU's does, so after a remove and rescan it
#                                    joins C's group again: tests/vm/README.md, "Resets")
#   00:07.0 pcie-root-port rp2 -> 02:00.0 edu "edu D" + 02:00.1 e1000e          (one group: foreign)
#   00:08.0 pcie-root-port rp3 -> 03:00.0 nvme PF, SR-IOV up to 4 VFs
#   00:09.0 pcie-pci-bridge    -> 04:01.0 edu "edu E" + 04:01.1 pci-ohci (USB)   (one group with
#                                                                                  the bridge)
#   00:1b.0 tpci200                      own group, driver standin-switch: the NVSwitch
#                                        (class 0x0680 as an NVSwitch; 00:0a.0 is --disk's,
#                                        00:0b.0.. --bench-gpus')
# no_timer_check: under TCG the IO-APIC timer check can miss its ticks, and with interrupt
# remapping on, 6.12 then panics ("timer doesn't work through Interrupt-remapped IO-APIC",
# arch/x86/kernel/apic/io_apic.c); the check is for broken boards, not for QEMU's q35.
QEMU=(qemu-system-x86_64
    -machine q35,kernel-irqchip=split -accel tcg -cpu max -m 1G -smp 2
    -nodefaults -display none -serial stdio -no-reboot
    -device intel-iommu,intremap=on,caching-mode=on
    -kernel "$KIMAGE" -initrd "$INITRD"
    -append "console=ttyS0${IOMMU:+ $IOMMU} panic=-1 oops=panic loglevel=4 no_timer_check hp.suite=$SUITE$EXTRA"
    -device e1000e,bus=pcie.0,addr=02.0
    -device edu,bus=pcie.0,addr=03.0
    -device edu,bus=pcie.0,addr=04.0
    -device pci-testdev,bus=pcie.0,addr=05.0
    -device pcie-root-port,id=rp1,bus=pcie.0,addr=06.0,chassis=1
    -device edu,bus=rp1,addr=00.0,multifunction=on
    -device ich9-intel-hda,id=hda,bus=rp1,addr=00.1,multifunction=on
    -audiodev none,id=snd0 -device hda-output,bus=hda.0,audiodev=snd0
    -device pcie-root-port,id=rp2,bus=pcie.0,addr=07.0,chassis=2
    -device edu,bus=rp2,addr=00.0,multifunction=on
    -device e1000e,bus=rp2,addr=00.1
    -device pcie-root-port,id=rp3,bus=pcie.0,addr=08.0,chassis=3
    -device nvme-subsys,id=s0
    -device nvme,bus=rp3,addr=00.0,subsys=s0,serial=hpvm0,sriov_max_vfs=4,sriov_vq_flexible=8,sriov_vi_flexible=4
    -device pcie-pci-bridge,id=pb,bus=pcie.0,addr=09.0
    -device edu,bus=pb,addr=01.0,multifunction=on
    -device pci-ohci,bus=pb,addr=01.1
    -device tpci200,bus=pcie.0,addr=1b.0
    ${DISK[@]+"${DISK[@]}"}
    ${BENCH_GPUS[@]+"${BENCH_GPUS[@]}"}
)

# The disk as it was before the boot, for a second boot (below).
[ -z "$DISK_FILE" ] || [ "$CHECK" = 0 ] || cp --sparse=always "$DISK_FILE" "$DISK_FILE.before-boot"
start=$(date +%s.%N)
set +e
timeout --foreground -k 5 "$TIMEOUT" "${QEMU[@]}" </dev/null 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e
wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
echo "run-vm: QEMU exit $rc after ${wall}s, log $LOG" >&2
[ "$CHECK" = 1 ] || exit "$rc"

fail=0
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "run-vm: FAIL: guest did not power off within ${TIMEOUT}s (hang)" >&2; fail=1
elif [ "$rc" != 0 ]; then
    echo "run-vm: FAIL: QEMU exited $rc" >&2; fail=1
fi
if grep -qE 'Kernel panic|Oops:|BUG:|general protection fault|Call Trace:' "$LOG"; then
    echo "run-vm: FAIL: kernel panic/oops/BUG in the serial log:" >&2
    grep -E 'Kernel panic|Oops:|BUG:|general protection fault|Call Trace:' "$LOG" | head -5 >&2
    fail=1
fi
summary=$(tr -d '\r' < "$LOG" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n1 || true)
if [ -z "$summary" ]; then
    echo "run-vm: FAIL: no 'N passed, N failed' summary line" >&2; fail=1
else
    echo "run-vm: guest: $summary" >&2
fi
# FAIL lines: a test listed in known-failures.txt does not fail the run (it is still reported).
KNOWN=$(sed 's/#.*//' "$HERE/known-failures.txt" 2>/dev/null | awk 'NF { print $1 }')
failed=$(tr -d '\r' < "$LOG" | sed -n 's/^FAIL \([^:]*\):.*/\1/p')
for t in $failed; do
    if echo "$KNOWN" | grep -qxF "$t"; then
        echo "run-vm: known failure (tests/vm/known-failures.txt): $(tr -d '\r' < "$LOG" | grep "^FAIL $t:")" >&2
    else
        echo "run-vm: $(tr -d '\r' < "$LOG" | grep "^FAIL $t:")" >&2
        fail=1
    fi
done
for t in $KNOWN; do
    if tr -d '\r' < "$LOG" | grep -q "^PASS $t "; then
        echo "run-vm: note: known failure $t now passes; remove it from known-failures.txt" >&2
    fi
done
# A guest kernel patches its own code while it runs (static keys, alternatives: text_poke_bp()
# in arch/x86/kernel/alternative.c puts an int3 on the first byte, rewrites the rest, then the
# first byte, and syncs every CPU between the stages; an int3 met in between is handled by
# poke_int3_handler). Under QEMU's multi-threaded TCG a vCPU can still run a translation of the
# code with the int3 after the last stage, and the kernel dies on it ("Oops: int3" on 6.12 in
# get_page_from_freelist, while crun enabled cgroup controllers). That run says nothing about the
# test: boot once more, from the same disk, and keep the first log beside the second.
if [ "$fail" = 1 ] && [ "$ATTEMPT" = 1 ] && grep -qE '(^|[] ])int3: 0000 \[#' "$LOG"; then
    echo "run-vm: NOTE: the guest kernel died on an int3 of its own code patching (QEMU TCG, see run-vm.sh); booting once more, first log in $LOG.first" >&2
    mv "$LOG" "$LOG.first"
    [ -z "$DISK_FILE" ] || mv "$DISK_FILE.before-boot" "$DISK_FILE"
    HOSTPREP_VM_ATTEMPT=2 exec "$0" "${ARGS[@]}"
fi
[ -z "$DISK_FILE" ] || rm -f "$DISK_FILE.before-boot"
echo "run-vm: $([ $fail = 0 ] && echo OK || echo FAILED)" >&2
exit "$fail"
