#!/bin/bash
# Fetch (and unpack) everything the VM harness needs from the Debian mirror, into a cache that
# survives between runs. Idempotent: a warm cache costs a few apt-cache look-ups and no downloads.
#
#   tests/vm/fetch.sh            -> prints the path of the env file the other scripts source
#
# Cache layout (${HOSTPREP_VM_CACHE:-$HOME/.cache/hostprep-vm}):
#   debs/                         downloaded .deb files
#   root-<kver>/                  dpkg -x of image + headers + headers-common + kbuild
#   busybox/                      dpkg -x of busybox-static
#   src-<ver>/samples/vfio-mdev/mtty.c   the only file we take out of linux-source
#   env-<kver>.sh, current.env    KVER, KROOT, KHEADERS, KIMAGE, MTTY_SRC, BUSYBOX
set -euo pipefail

CACHE=${HOSTPREP_VM_CACHE:-$HOME/.cache/hostprep-vm}
mkdir -p "$CACHE/debs" "$CACHE/stamps"
log() { echo "fetch: $*" >&2; }

updated=0
apt_update_once() {
    if [ "$updated" = 0 ]; then
        log "apt-get update"
        apt-get update -qq >&2
        updated=1
    fi
}

# Which kernel: HOSTPREP_VM_KERNEL=6.1 (default) is the one linux-image-amd64 depends on right now;
# 6.12 is the newest linux-image-6.12.N+deb12-amd64-unsigned for which the headers, the -common
# headers and linux-kbuild of the same version exist too (bookworm-backports/-updates ship 6.12
# beside 6.1). Both are resolved with apt-cache at run time, never pinned.
KSEL=${HOSTPREP_VM_KERNEL:-6.1}
resolve_kernel() {
    case $KSEL in
        6.1)
            apt-cache depends linux-image-amd64 2>/dev/null \
                | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1 ;;
        *)
            local series=$KSEL abi pkgs
            pkgs=$(apt-cache search --names-only "^linux-(image|headers|kbuild)-${series//./\\.}\\.[0-9]+" 2>/dev/null \
                | awk '{ print $1 }')
            for abi in $(echo "$pkgs" | sed -n "s/^linux-image-\(${series//./\\.}\.[0-9]*+deb[0-9]*\)-amd64-unsigned$/\1/p" \
                         | sort -t. -k3,3nr); do
                if echo "$pkgs" | grep -qxF "linux-headers-$abi-amd64" \
                    && echo "$pkgs" | grep -qxF "linux-headers-$abi-common" \
                    && echo "$pkgs" | grep -qxF "linux-kbuild-$abi"; then
                    echo "linux-image-$abi-amd64-unsigned"; return
                fi
            done ;;
    esac
}
IMG_PKG=$(resolve_kernel || true)
if [ -z "$IMG_PKG" ]; then
    apt_update_once
    IMG_PKG=$(resolve_kernel)
fi
[ -n "$IMG_PKG" ] || { log "cannot resolve a Debian $KSEL kernel with headers and kbuild"; exit 1; }
KVER=${IMG_PKG#linux-image-}; KVER=${KVER%-unsigned}   # 6.1.0-57-amd64, 6.12.118+deb12-amd64
KABI=${KVER%-amd64}                           # 6.1.0-57, 6.12.118+deb12
VER=$(apt-cache show "$IMG_PKG" | sed -n 's/^Version: //p' | head -n1)   # 6.1.192-3, 6.12.118-1~deb12u1
SERIES=$(echo "$KVER" | sed 's/^\([0-9]*\.[0-9]*\).*/\1/')           # 6.1, 6.12
if [ "$SERIES" = 6.1 ]; then
    KBUILD_PKG=linux-kbuild-$SERIES         # 6.1's kbuild is per series, 6.12's per ABI
    SRC_VER=$VER
else
    KBUILD_PKG=linux-kbuild-$KABI
    # Only samples/vfio-mdev/mtty.c is taken from the source; its candidate is good enough.
    SRC_VER=$(apt-cache policy "linux-source-$SERIES" | sed -n 's/^ *Candidate: //p')
fi
BB_VER=$(apt-cache policy busybox-static | sed -n 's/^ *Candidate: //p')
# kmod's depmod writes the modules.*.bin indexes libkmod (hence hostprep) needs; busybox depmod
# writes text files only. Take kmod from the mirror too, so the host needs no kmod installed.
KMOD_VER=$(apt-cache policy kmod | sed -n 's/^ *Candidate: //p')

PKGS=("$IMG_PKG=$VER" "linux-headers-$KVER=$VER" "linux-headers-$KABI-common=$VER"
      "$KBUILD_PKG=$VER" "linux-source-$SERIES=$SRC_VER" "busybox-static=$BB_VER"
      "kmod=$KMOD_VER")

deb_path() { # pkg=ver -> expected file name in debs/ (epochs are encoded as %3a)
    local p=${1%%=*} v=${1#*=}
    ls "$CACHE/debs/${p}_${v/:/%3a}_"*.deb 2>/dev/null | head -n1
}

missing=()
for pv in "${PKGS[@]}"; do
    [ -n "$(deb_path "$pv")" ] || missing+=("$pv")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "downloading ${missing[*]}"
    if ! (cd "$CACHE/debs" && apt-get download -q "${missing[@]}" >&2); then
        apt_update_once
        (cd "$CACHE/debs" && apt-get download -q "${missing[@]}" >&2)
    fi
fi

KMODROOT=$CACHE/kmod
stamp=$CACHE/stamps/kmod-$KMOD_VER
if [ ! -e "$stamp" ]; then
    log "unpacking kmod $KMOD_VER"
    rm -rf "$KMODROOT"; mkdir -p "$KMODROOT"
    dpkg -x "$(deb_path "kmod=$KMOD_VER")" "$KMODROOT"
    ln -sf kmod "$KMODROOT/bin/depmod"; ln -sf kmod "$KMODROOT/bin/modprobe"
    touch "$stamp"
fi
DEPMOD=$(command -v depmod || echo "$KMODROOT/bin/depmod")

KROOT=$CACHE/root-$KVER
stamp=$CACHE/stamps/kernel-$KVER-$VER
if [ ! -e "$stamp" ]; then
    log "unpacking kernel, headers, kbuild into $KROOT"
    rm -rf "$KROOT"; mkdir -p "$KROOT"
    for pv in "$IMG_PKG=$VER" "linux-headers-$KVER=$VER" "linux-headers-$KABI-common=$VER" \
              "$KBUILD_PKG=$VER"; do
        dpkg -x "$(deb_path "$pv")" "$KROOT"
    done
    # The arch headers' Makefile includes the -common tree by absolute path; point it at the cache.
    sed -i "s|^include /usr/src/|include $KROOT/usr/src/|" "$KROOT/usr/src/linux-headers-$KVER/Makefile"
    "$DEPMOD" -b "$KROOT" "$KVER"      # dpkg -x runs no maintainer scripts
    touch "$stamp"
fi

SRC=$CACHE/src-$SRC_VER
stamp=$CACHE/stamps/mtty-$SRC_VER
if [ ! -e "$stamp" ]; then
    log "extracting samples/vfio-mdev/mtty.c from linux-source-$SERIES"
    rm -rf "$SRC"; mkdir -p "$SRC"
    dpkg-deb --fsys-tarfile "$(deb_path "linux-source-$SERIES=$SRC_VER")" \
        | tar -xO "./usr/src/linux-source-$SERIES.tar.xz" \
        | tar -xJ -C "$SRC" --strip-components=1 "linux-source-$SERIES/samples/vfio-mdev/mtty.c"
    touch "$stamp"
fi

BBROOT=$CACHE/busybox
stamp=$CACHE/stamps/busybox-$BB_VER
if [ ! -e "$stamp" ]; then
    log "unpacking busybox-static $BB_VER"
    rm -rf "$BBROOT"; mkdir -p "$BBROOT"
    dpkg -x "$(deb_path "busybox-static=$BB_VER")" "$BBROOT"
    touch "$stamp"
fi

ENV=$CACHE/env-$KVER.sh
cat > "$ENV.tmp" <<EOT
KVER=$KVER
KSERIES=$SERIES
KPKGVER=$VER
KROOT=$KROOT
KIMAGE=$KROOT/boot/vmlinuz-$KVER
KMODDIR=$KROOT/lib/modules/$KVER
KHEADERS=$KROOT/usr/src/linux-headers-$KVER
MTTY_SRC=$SRC/samples/vfio-mdev/mtty.c
BUSYBOX=$BBROOT/bin/busybox
DEPMOD=$DEPMOD
KMODPROBE=$KMODROOT/bin/modprobe
EOT
mv "$ENV.tmp" "$ENV"
[ "$KSEL" != 6.1 ] || cp "$ENV" "$CACHE/current.env"
echo "$ENV"
