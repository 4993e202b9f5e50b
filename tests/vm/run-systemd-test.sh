#!/bin/bash
# The systemd flavour of the VM test (CTest: vm.systemd).
#
#   tests/vm/run-systemd-test.sh BUILD_DIR
#   tests/vm/run-systemd-test.sh --bench-driverctl [--reps N] [--log FILE] BUILD_DIR
#
# --bench-driverctl: not the test but tests/bench/run's driverctl baseline: the same guest built
# from a second cached rootfs with Debian's driverctl added (HOSTPREP_VM_EXTRA_PKGS=driverctl; the
# test's rootfs stays as it is), in its own work directory, with none of hostprep's units enabled
# (the GPUs stay on standin after boot) and hostprep-bench-driverctl.service instead of the checks:
# it prints "BENCH slow.driverctl|slow.driverctl.back|slow.hostprep <ms>" lines, N repetitions
# (default 3), to the serial log (--log, default WORK/serial-bench-driverctl.log).
#
# Boots a Debian 12 rootfs (debootstrap, cached by build-systemd-rootfs.sh) under systemd on the
# harness's QEMU topology, with hostprep installed by its own install rules (cmake --install
# BUILD_DIR, DESTDIR into a copy of the rootfs), /etc/hostprep/config.yaml in vm-passthrough mode
# (edu devices as GPUs, standin as the host driver, loaded by systemd-modules-load like nvidia),
# a stand-in kubelet.service and hostprep-vmtest.service, whose checks (systemd/hostprep-vmtest)
# print PASS/FAIL lines to the serial console. Root file system: an ext4 image made with
# mkfs.ext4 -d (no loop mount) on virtio-blk; a small busybox initramfs loads virtio/ext4 and
# switch_roots into /lib/systemd/systemd.
# Exit: 0 all checks passed, 1 a failure, 77 the Debian mirror is unreachable (CTest skip).
# Needs root (debootstrap, and the rootfs copy keeps root-owned files), mkfs.ext4 (e2fsprogs).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH=0; REPS=3; LOG=
while [ $# -gt 1 ]; do
    case $1 in
        --bench-driverctl) BENCH=1; shift ;;
        --reps) REPS=$2; shift 2 ;;
        --log) LOG=$2; shift 2 ;;
        *) echo "run-systemd-test: unknown argument $1" >&2; exit 2 ;;
    esac
done
BUILD=$(realpath "${1:?usage: run-systemd-test.sh [--bench-driverctl [--reps N] [--log FILE]] BUILD_DIR}")
[ -f "$BUILD/CMakeCache.txt" ] || { echo "run-systemd-test: $BUILD is not a CMake build dir" >&2; exit 1; }
CACHE=${HOSTPREP_VM_CACHE:-$HOME/.cache/hostprep-vm}
WORK=${HOSTPREP_VM_WORK:-$CACHE/work}/systemd
if [ $BENCH = 1 ]; then
    WORK=$WORK-bench-driverctl
    export HOSTPREP_VM_EXTRA_PKGS=driverctl
fi
log() { echo "run-systemd-test: $*" >&2; }
command -v qemu-system-x86_64 >/dev/null || { log "qemu-system-x86_64 not installed"; exit 1; }
command -v mkfs.ext4 >/dev/null || PATH=$PATH:/usr/sbin:/sbin
[ "$(id -u)" = 0 ] || { log "needs root (debootstrap, root-owned rootfs)"; exit 1; }
t0=$(date +%s)

ENV=$("$HERE/fetch.sh")
# shellcheck disable=SC1090
. "$ENV"
rc=0; TARBALL=$("$HERE/build-systemd-rootfs.sh") || rc=$?
[ "$rc" = 0 ] || exit "$rc"
# standin.ko (built against the fetched headers, skipped when unchanged) comes from the
# initramfs builder of the main suite, in its own work directory.
mkdir -p "$WORK"
HOSTPREP_VM_WORK=$WORK/base "$HERE/build-initramfs.sh" >/dev/null
t1=$(date +%s)

# --- the root file system of this run -------------------------------------------------------
R=$WORK/root
rm -rf --one-file-system "$R"; mkdir -p "$R"
tar -C "$R" --numeric-owner -xf "$TARBALL"
DESTDIR=$R cmake --install "$BUILD" --strip >"$WORK/install.log" 2>&1 \
    || { cat "$WORK/install.log" >&2; exit 1; }
# The units name the installed binary (configured with the build's install prefix).
unit=$(find "$R"/usr/local/lib/systemd/system "$R"/usr/lib/systemd/system "$R"/lib/systemd/system \
        -maxdepth 1 -name hostprep-prepare.service 2>/dev/null | head -n1 || true)
[ -n "$unit" ] || { log "cmake --install put no hostprep-prepare.service into a systemd unit directory"; exit 1; }
bin=$(sed -n 's/^ExecStart=\([^ ]*hostprep\) .*/\1/p' "$unit" | head -n1)
if [ -z "$bin" ] || [ ! -x "$R$bin" ]; then
    log "the installed hostprep-prepare.service names '$bin', not installed"; exit 1
fi
# hostprep check-node runs hostprep-check-node from libexec/hostprep beside hostprep's sbin.
helper=$(dirname "$(dirname "$bin")")/libexec/hostprep/hostprep-check-node
[ -x "$R$helper" ] || { log "cmake --install put no $helper beside $bin"; exit 1; }
for b in "$bin" "$helper"; do
    if missing=$(chroot "$R" ldd "$b" | grep 'not found'); then
        log "libraries of $b missing in the rootfs (add them to build-systemd-rootfs.sh):"
        echo "$missing" >&2; exit 1
    fi
done

# Modules: what the harness's topology and hostprep need, plus standin (extra/), indexed.
MODS=(vfio vfio_pci vfio_pci_core vfio_iommu_type1 vfio_virqfd irqbypass mdev pci_pf_stub
      e1000e nvme nvme_core crc64_rocksoft_generic snd_hda_intel snd_hda_codec_generic
      virtio_pci virtio_blk crc32c_generic ext4)
. "$HERE/modules.sh"
copy_modules "$R" "${MODS[@]}"
mkdir -p "$R/lib/modules/$KVER/extra"
cp "$WORK/base/mod-standin/standin.ko" "$R/lib/modules/$KVER/extra/"
"$DEPMOD" -b "$R" "$KVER"
echo standin > "$R/etc/modules-load.d/standin.conf"     # the host driver loads at boot, as nvidia

# The install rules put the default config where the agent reads it, whatever the prefix.
[ -f "$R/etc/hostprep/config.yaml" ] || { log "cmake --install put no /etc/hostprep/config.yaml"; exit 1; }
install -D -m 0644 "$HERE/systemd/config.yaml" "$R/etc/hostprep/config.yaml"
install -D -m 0755 "$HERE/systemd/kubelet-standin" "$R/usr/local/libexec/kubelet-standin"
install -D -m 0755 "$HERE/systemd/hostprep-vmtest" "$R/usr/local/libexec/hostprep-vmtest"
install -m 0644 "$HERE/systemd/kubelet.service" "$HERE/systemd/hostprep-vmtest.service" "$R/etc/systemd/system/"
if [ $BENCH = 1 ]; then
    [ -x "$R/usr/sbin/driverctl" ] || { log "no driverctl in the bench rootfs $TARBALL"; exit 1; }
    install -D -m 0755 "$HERE/systemd/hostprep-bench-driverctl" "$R/usr/local/libexec/hostprep-bench-driverctl"
    install -m 0644 "$HERE/systemd/hostprep-bench-driverctl.service" "$R/etc/systemd/system/"
fi
if [ $BENCH = 0 ]; then
    # The DaemonSets' pods: the image as `cmake --build BUILD --target image` writes it, its layer
    # unpacked once into the rootfs every bundle shares (as a runtime's snapshot), and one OCI
    # bundle per manifest, translated by pod2oci.py from the manifest and the kustomization
    # (nothing written by hand). hostprep-pod runs them with crun in the guest.
    cmake --build "$BUILD" --target image >"$WORK/image.log" 2>&1 || { cat "$WORK/image.log" >&2; exit 1; }
    ARCHIVE=$BUILD/hostprep-image.oci.tar
    LAYOUT=$WORK/image-layout
    rm -rf "$LAYOUT"; mkdir -p "$LAYOUT"; tar -C "$LAYOUT" -xf "$ARCHIVE"
    OCI=$R/var/lib/hostprep-oci
    mkdir -p "$OCI/rootfs" "$OCI/bundles"
    manifest=$(jq -r '.manifests[0].digest' "$LAYOUT/index.json")
    for layer in $(jq -r '.layers[].digest' "$LAYOUT/blobs/sha256/${manifest#sha256:}"); do
        tar -C "$OCI/rootfs" --numeric-owner -xzf "$LAYOUT/blobs/sha256/${layer#sha256:}"
    done
    PY=$(command -v /usr/bin/python3 || command -v python3)
    K8S=$HERE/../../systemd/kubernetes
    for m in "$K8S"/hostprep-*.yaml; do
        "$PY" "$HERE/pod2oci.py" --manifest "$m" --kustomization "$K8S/kustomization.yaml" \
            --image-layout "$LAYOUT" --rootfs /var/lib/hostprep-oci/rootfs \
            --out "$OCI/bundles/$(basename "$m" .yaml)" >&2
    done
    install -D -m 0755 "$HERE/systemd/hostprep-pod" "$R/usr/local/libexec/hostprep-pod"
    install -D -m 0644 "$HERE/systemd/hostprep-podtest" "$R/usr/local/libexec/hostprep-podtest"
fi
echo hpvm > "$R/etc/hostname"
echo 5f0e1c2a9b8d4e7f8a6b3c2d1e0f9a8b > "$R/etc/machine-id"   # not a first boot
echo '/dev/vda / ext4 rw 0 0' > "$R/etc/fstab"
systemctl --root="$R" --quiet set-default multi-user.target
systemctl --root="$R" --quiet mask serial-getty@ttyS0.service getty@tty1.service \
    apt-daily.timer apt-daily-upgrade.timer
if [ $BENCH = 1 ]; then
    systemctl --root="$R" --quiet enable hostprep-bench-driverctl.service
else
    systemctl --root="$R" --quiet enable hostprep-prepare.service hostprep.service kubelet.service \
        hostprep-vmtest.service
fi

IMG=$WORK/root.img
rm -f "$IMG"
size=$(( $(du -sm "$R" | cut -f1) + 256 ))
mkfs.ext4 -q -F -L hpvm-root -d "$R" "$IMG" "${size}M"

# --- the initramfs that mounts it -----------------------------------------------------------
I=$WORK/initramfs
rm -rf "$I"; mkdir -p "$I"/{bin,sbin,proc,sys,dev,newroot} "$I/lib/modules/$KVER"
cp "$BUSYBOX" "$I/bin/busybox"
ln -s busybox "$I/bin/sh"
ln -s ../bin/busybox "$I/sbin/modprobe"
copy_modules "$I" virtio_pci virtio_blk crc32c_generic ext4
"$DEPMOD" -b "$I" "$KVER"
install -m 0755 "$HERE/systemd/init" "$I/init"
INITRD=$WORK/initramfs.cpio.gz
(cd "$I" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 > "$INITRD"
t2=$(date +%s)
log "rootfs ready in $((t1 - t0))s, image $(du -h --apparent-size "$IMG" | cut -f1) + initramfs in $((t2 - t1))s"

rc=0
if [ $BENCH = 1 ]; then
    "$HERE/run-vm.sh" --initrd "$INITRD" --disk "$IMG" --suite bench-driverctl --append "hp.nslow=$REPS" \
        --timeout "${HOSTPREP_VM_TIMEOUT:-1200}" --log "${LOG:-$WORK/serial-bench-driverctl.log}" || rc=$?
else
    "$HERE/run-vm.sh" --initrd "$INITRD" --disk "$IMG" --suite systemd \
        --timeout "${HOSTPREP_VM_TIMEOUT:-600}" --log "$WORK/serial-systemd.log" || rc=$?
fi
log "total $(( $(date +%s) - t0 ))s, exit $rc"
exit $rc
