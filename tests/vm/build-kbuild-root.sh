#!/bin/bash
# Build (once) the Debian 13 root in which the test modules are compiled for a trixie-backports
# kernel (HOSTPREP_VM_KERNEL=7.3), cached.
#
#   tests/vm/build-kbuild-root.sh        -> prints the path of the cached root directory
#
# Debian 13's kernel headers need Debian 13's compiler (linux-headers-*-amd64 depends on
# gcc-14-for-host) and its linux-kbuild programs link glibc 2.38 and libssl3t64, which Debian 12
# lacks; so standin.ko and mtty.ko are built in a chroot of `debootstrap --variant=minbase trixie`
# with gcc-14-for-host, make and linux-kbuild's libraries. fetch.sh unpacks the kernel's headers
# and kbuild into it (dpkg -x, at their own paths: the arch headers' Makefile names the -common
# tree by absolute path) and build-initramfs.sh runs make there with chroot. The root is a
# directory $CACHE/kbuild-root/trixie-<key>/, keyed by the recipe, the suite, the mirror and the
# package list: a second run only prints the path. Needs root (debootstrap, chroot).
# Exit 77 when debootstrap cannot reach the mirror or when not root (CTest skips the test);
# other failures exit 1.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/mirror.sh"

CACHE=${HOSTPREP_VM_CACHE:-$HOME/.cache/hostprep-vm}
SUITE=trixie
MIRROR=$(debian_mirror)
# gcc-14-for-host is what linux-headers-*-amd64 asks for (CC=x86_64-linux-gnu-gcc-14); binutils
# (as, ld: gcc and kbuild call them by their plain names); make;
# libelf1t64, libssl3t64, zlib1g: what linux-kbuild's programs (modpost, fixdep) link.
PKGS=(gcc-14-for-host binutils make libc6-dev libelf1t64 libssl3t64 zlib1g)
# Bump when the way the root is made changes.
RECIPE=1
log() { echo "build-kbuild-root: $*" >&2; }

key=$(printf '%s\n' "$RECIPE" "$SUITE" "$MIRROR" "${PKGS[@]}" | sha256sum | cut -c1-16)
DIR=$CACHE/kbuild-root
OUT=$DIR/$SUITE-$key
if [ -e "$OUT/.complete" ]; then
    echo "$OUT"
    exit 0
fi
[ "$(id -u)" = 0 ] || { log "building modules for a Debian 13 kernel needs root (debootstrap, chroot): skipping"; exit 77; }
command -v debootstrap >/dev/null || { log "debootstrap not installed (.ci/install-deps)"; exit 1; }
[ -e /usr/share/debootstrap/scripts/$SUITE ] || { log "this debootstrap does not know $SUITE"; exit 1; }
mkdir -p "$DIR"
tmp=$(mktemp -d "$DIR/build.XXXXXX")
cleanup() { # debootstrap may leave proc/sys mounted in the target on failure
    { grep -o " $tmp/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
    rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT
log "debootstrap --variant=minbase $SUITE from $MIRROR (${PKGS[*]})"
t0=$(date +%s)
incl=$(IFS=,; echo "${PKGS[*]}")
if ! debootstrap --variant=minbase --include="$incl" "$SUITE" "$tmp/root" "$MIRROR" \
        >"$tmp/debootstrap.log" 2>&1; then
    tail -n 20 "$tmp/debootstrap.log" >&2
    # Only an unreachable mirror is a skip; anything else is a real failure.
    if grep -qiE 'Failed getting release file|Temporary failure resolving|Could not resolve|Connection (refused|timed out)|Network is unreachable|No route to host' \
            "$tmp/debootstrap.log" "$tmp/root/debootstrap/debootstrap.log" 2>/dev/null; then
        log "mirror $MIRROR unreachable: skipping"
        exit 77
    fi
    exit 1
fi
rm -rf "$tmp/root"/var/cache/apt/archives/*.deb "$tmp/root"/var/lib/apt/lists/* \
       "$tmp/root"/usr/share/{doc,man,info,locale}/*
# Superseded recipes go first (a root is ~300 MB).
find "$DIR" -maxdepth 1 -name "$SUITE-*" ! -name "${OUT##*/}" -exec rm -rf --one-file-system {} +
rm -rf --one-file-system "$OUT"
mv "$tmp/root" "$OUT"
touch "$OUT/.complete"
log "$(du -sh "$OUT" | cut -f1) $OUT in $(( $(date +%s) - t0 ))s"
echo "$OUT"
