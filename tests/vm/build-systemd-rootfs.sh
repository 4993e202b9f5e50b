#!/bin/bash
# Build (once) the Debian 12 rootfs of the systemd flavour of the VM test, cached.
#
#   tests/vm/build-systemd-rootfs.sh        -> prints the path of the cached rootfs tarball
#   HOSTPREP_VM_EXTRA_PKGS="driverctl" tests/vm/build-systemd-rootfs.sh
#                                           -> a second flavour with these packages added (the
#                                              benchmark's driverctl baseline); its own tarball,
#                                              $SUITE+<pkgs>-<key>.tar, so the CI test's rootfs
#                                              is neither changed nor evicted
#
# debootstrap --variant=minbase bookworm with systemd, udev, kmod and the runtime libraries the
# hostprep binaries link or open (libudev; libkmod and libsystemd with dlopen; libsimdjson and the
# C++ runtime it loads for hostprep-check-node). Boost.Program_options, spdlog, fmt, yaml-cpp, zlib
# and the C++ runtime are linked into hostprep itself. The result is a tarball under $CACHE/systemd-rootfs/<key>.tar, keyed by the suite,
# the mirror and the package list: a second run only prints the path. Needs root (debootstrap).
# Exit 77 when debootstrap cannot reach the mirror (CTest skips the test); other failures exit 1.
set -euo pipefail

CACHE=${HOSTPREP_VM_CACHE:-$HOME/.cache/hostprep-vm}
SUITE=${HOSTPREP_VM_SUITE:-bookworm}
MIRROR=${HOSTPREP_VM_MIRROR:-http://deb.debian.org/debian}
# Keep in sync with the libraries `ldd` lists for build/hostprep and build/hostprep-check-node
# (libsimdjson, the shared C++ runtime; run-systemd-test.sh checks both);
# procps for /bin/kill (hostprep.service's ExecReload), as on any real node; crun, the OCI
# runtime that runs the DaemonSets' pods from the image (tests/vm/systemd/hostprep-pod).
PKGS=(systemd udev kmod dbus procps crun
      libkmod2 libudev1 libsystemd0 libsimdjson14)
# Extra packages (space-separated), for the benchmark only; part of the key and of the name.
read -r -a EXTRA <<< "${HOSTPREP_VM_EXTRA_PKGS:-}"
PKGS+=("${EXTRA[@]}")
# Bump when the way the tarball is made changes.
RECIPE=1
log() { echo "build-systemd-rootfs: $*" >&2; }

key=$(printf '%s\n' "$RECIPE" "$SUITE" "$MIRROR" "${PKGS[@]}" | sha256sum | cut -c1-16)
DIR=$CACHE/systemd-rootfs
NAME=$SUITE
[ ${#EXTRA[@]} = 0 ] || NAME=$SUITE+$(IFS=+; echo "${EXTRA[*]}")
OUT=$DIR/$NAME-$key.tar
if [ -s "$OUT" ]; then
    echo "$OUT"
    exit 0
fi
command -v debootstrap >/dev/null || { log "debootstrap not installed (.ci/install-deps)"; exit 1; }
[ "$(id -u)" = 0 ] || { log "debootstrap needs root"; exit 1; }
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
# Smaller and quicker to copy per run: no apt lists, docs, man pages, locales.
rm -rf "$tmp/root"/var/cache/apt/archives/*.deb "$tmp/root"/var/lib/apt/lists/* \
       "$tmp/root"/usr/share/{doc,man,info,locale}/*
tar -C "$tmp/root" --numeric-owner -cf "$OUT.tmp" .
mv "$OUT.tmp" "$OUT"
# Superseded recipes of this flavour only ("bookworm-*" never matches "bookworm+driverctl-*").
find "$DIR" -maxdepth 1 -name "$NAME-*.tar" ! -name "${OUT##*/}" -delete
log "$(du -h "$OUT" | cut -f1) $OUT in $(( $(date +%s) - t0 ))s"
echo "$OUT"
