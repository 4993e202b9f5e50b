#!/bin/bash
# Build the guest initramfs for the VM harness.
#
#   tests/vm/build-initramfs.sh [HOSTPREP_BINARY]     -> prints the path of the initramfs
#
# Contents: static busybox (applet links made by /init), the guest kernel's modules the tests need
# (with their dependencies, indexed by kmod's depmod so libkmod works in the guest), standin.ko and
# mtty.ko (the kernel sample plus mtty-pci-parent.pl's parent= parameter) built against the
# fetched headers (for a Debian 13 kernel in its Debian 13 root, with chroot: needs root), the static helpers, the guest test scripts, and -- when given -- the hostprep
# binary with the shared libraries ldd reports plus the dynamic loader.
# Work files go to ${HOSTPREP_VM_WORK:-$CACHE/work}; module and helper builds are skipped when
# their sources have not changed.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
HOSTPREP=${1:-}
ENV=$("$HERE/fetch.sh")
# shellcheck disable=SC1090
. "$ENV"
CACHE=${HOSTPREP_VM_CACHE:-$HOME/.cache/hostprep-vm}
WORK=${HOSTPREP_VM_WORK:-$CACHE/work}
mkdir -p "$WORK"
log() { echo "build-initramfs: $*" >&2; }

# --- out-of-tree modules -------------------------------------------------------------------
build_module() { # name, source files...
    local name=$1; shift
    local dir=$WORK/mod-$name
    local sum
    sum=$( (echo "$KVER"; cat "$@") | sha256sum | cut -d' ' -f1)
    if [ -e "$dir/$name.ko" ] && [ "$(cat "$dir/.sum" 2>/dev/null)" = "$sum" ]; then
        return
    fi
    log "building $name.ko against $KVER"
    rm -rf "$dir"; mkdir -p "$dir"
    cp "$@" "$dir/"
    echo "obj-m := $name.o" > "$dir/Kbuild"
    # No BTF for test modules: 6.12's config has CONFIG_DEBUG_INFO_BTF_MODULES=y, which would
    # need pahole (dwarves) on the build host; a module loads the same without its .BTF section.
    if [ -n "${KBUILD_ROOT:-}" ]; then
        # A Debian 13 kernel: built in its Debian 13 root (build-kbuild-root.sh), where the
        # headers and kbuild are at their own paths and gcc-14 is the compiler they name.
        local in=/build/mod-$name
        rm -rf "${KBUILD_ROOT:?}$in"; mkdir -p "$KBUILD_ROOT$in"
        cp "$dir"/* "$KBUILD_ROOT$in/"
        # objtool reads /proc/self: a proc of its own, in a mount namespace that goes with it.
        unshare --mount --pid --fork --mount-proc="$KBUILD_ROOT/proc" \
            chroot "$KBUILD_ROOT" make -s -C "$KHEADERS" M="$in" CONFIG_DEBUG_INFO_BTF_MODULES= modules \
            >"$dir/build.log" 2>&1 || { cat "$dir/build.log" >&2; exit 1; }
        cp "$KBUILD_ROOT$in/$name.ko" "$dir/"
    else
        make -s -C "$KHEADERS" M="$dir" CONFIG_DEBUG_INFO_BTF_MODULES= modules >"$dir/build.log" 2>&1 \
            || { cat "$dir/build.log" >&2; exit 1; }
    fi
    echo "$sum" > "$dir/.sum"
}
build_module standin "$HERE/standin/standin.c"
# mtty with a `parent=` parameter for its mdev parent on a PCI function (mtty-pci-parent.pl).
mkdir -p "$WORK/mtty-src"
perl "$HERE/mtty-pci-parent.pl" "$MTTY_SRC" > "$WORK/mtty-src/mtty.c.new"
mv "$WORK/mtty-src/mtty.c.new" "$WORK/mtty-src/mtty.c"
build_module mtty "$WORK/mtty-src/mtty.c"

# --- static helpers ------------------------------------------------------------------------
mkdir -p "$WORK/bin"
for h in vfio-group-status hold sysfs-write pci-config; do
    if [ ! -x "$WORK/bin/$h" ] || [ "$HERE/$h.c" -nt "$WORK/bin/$h" ]; then
        log "building $h"
        gcc -static -O2 -Wall -Wextra -Werror -o "$WORK/bin/$h" "$HERE/$h.c"
    fi
done

# --- root file system ----------------------------------------------------------------------
R=$WORK/rootfs
rm -rf "$R"
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,proc,sys,dev,run,tmp,root,var,tests} \
         "$R/lib/modules/$KVER/extra"
cp "$BUSYBOX" "$R/bin/busybox"
ln -s busybox "$R/bin/sh"
ln -s ../bin/busybox "$R/sbin/modprobe"     # the kernel's request_module() runs /sbin/modprobe
echo 'root:x:0:0:root:/root:/bin/sh' > "$R/etc/passwd"
echo 'root:x:0:' > "$R/etc/group"

# Modules (and what they depend on), at their usual paths.
# (vfio_virqfd is a module on 6.1 only; copy_modules skips what a kernel lacks.)
MODS=(vfio vfio_pci vfio_pci_core vfio_iommu_type1 vfio_virqfd irqbypass mdev pci_pf_stub
      e1000e nvme nvme_core crc64_rocksoft_generic snd_hda_intel snd_hda_codec_generic iommufd)
. "$HERE/modules.sh"
copy_modules "$R" "${MODS[@]}"
cp "$WORK/mod-standin/standin.ko" "$WORK/mod-mtty/mtty.ko" "$R/lib/modules/$KVER/extra/"
# A Debian 13 kernel's config is in lib/modules/<kver>/ (linux-base-*), its only copy on such a
# node: there too in the guest, for preflight's iommu.iommufd to read.
[ ! -e "$KMODDIR/config" ] || cp "$KMODDIR/config" "$R/lib/modules/$KVER/"
# The module tree without standin.ko, as a GPU Operator node's lib/modules lacks nvidia: kmod's
# indexes for it, which hostprep.operator_driver_* swap in (the guest's busybox depmod writes no
# .bin indexes, which libkmod reads), under /usr/share/hostprep-vm/no-standin/.
mv "$R/lib/modules/$KVER/extra/standin.ko" "$WORK/standin.ko.aside"
"$DEPMOD" -b "$R" "$KVER"
mkdir -p "$R/usr/share/hostprep-vm/no-standin"
cp "$R/lib/modules/$KVER"/modules.* "$R/usr/share/hostprep-vm/no-standin/"
mv "$WORK/standin.ko.aside" "$R/lib/modules/$KVER/extra/standin.ko"
"$DEPMOD" -b "$R" "$KVER"

cp "$WORK/bin/vfio-group-status" "$WORK/bin/hold" "$WORK/bin/sysfs-write" "$WORK/bin/pci-config" "$R/usr/local/bin/"
cp "$HERE"/guest/*.sh "$R/tests/"
install -m 0755 "$HERE/guest/init" "$R/init"

# hostprep and its shared libraries (paths as ldd reports them, plus the loader).
if [ -n "$HOSTPREP" ]; then
    [ -x "$HOSTPREP" ] || { log "not an executable: $HOSTPREP"; exit 1; }
    # Debug info only slows the guest's initramfs unpacking under TCG.
    strip --strip-debug -o "$R/usr/bin/hostprep" "$HOSTPREP" 2>/dev/null || cp "$HOSTPREP" "$R/usr/bin/hostprep"
    # libkmod is opened with dlopen(3) when a module is loaded (drivers/seam/kmod.cpp): ldd does not
    # list it, so it and its own libraries are added by name.
    KMODLIB=$(ldconfig -p | awk '/libkmod\.so\.2 .*x86-64/ && !n++ { print $NF }')
    { ldd "$HOSTPREP"; [ -z "$KMODLIB" ] || { printf '\t%s\n' "$KMODLIB"; ldd "$KMODLIB"; }; } \
        | awk '/=> \// { print $3 } /^\t\// { print $1 }' | sort -u | while read -r lib; do
        mkdir -p "$R/$(dirname "$lib")"
        cp -L "$lib" "$R/$lib"
    done
fi

OUT=$WORK/initramfs.cpio.gz
(cd "$R" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
log "$(du -h "$OUT" | cut -f1) $OUT"
echo "$OUT"
