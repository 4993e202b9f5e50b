#!/bin/bash
# Builds the hostprep container image as an OCI image archive, offline, from what this machine
# has: no base image, no registry. (CMake: cmake --build build --target image.)
#
#   systemd/image/build-image.sh --binary build/hostprep --out build/hostprep-image.oci.tar
#       [--version 0.1.0] [--name ghcr.io/hostprep/hostprep] [--source URL] [--license SPDX]
#       [--source-dir DIR] [--work DIR]
#
# The image is one layer: the hostprep binary (debug info stripped) at /usr/sbin/hostprep, exactly
# the shared libraries `ldd` lists for it, libkmod and libsystemd (opened with dlopen) and what
# they need, and the dynamic loader its PT_INTERP names (Debian 12's merged /usr: /lib and /lib64
# are links into /usr), the licence, and the empty directories a runtime mounts over. Nothing else: the host's
# pci.ids, config and module tree are mounted at run time under /host (systemd/kubernetes/*.yaml);
# there is no shell.
#
# Reproducible: the same binary, libraries and commit give the same bytes, hence the same digest.
# Every time stamp is SOURCE_DATE_EPOCH (else the commit time of --source-dir's HEAD, else 0):
# file mtimes and the config's "created"; tar entries sorted by name, uid/gid 0, numeric owners,
# no atime/ctime; gzip -n (no name, no time); JSON by jq with sorted keys. Labels (image config):
# org.opencontainers.image.{title,description,version,revision,source,licenses,created}.
# (OCI image spec: image-layout.md, manifest.md, config.md, annotations.md.)
#
# The archive is an OCI image layout in a tar (oci-layout, index.json, blobs/sha256/...), what
# `skopeo copy oci-archive:FILE ...`, `podman load -i FILE` and `ctr images import FILE` read.
# Prints the manifest digest (sha256:...) on stdout. Needs bash, jq, GNU tar, gzip, sha256sum,
# ldd, strip (binutils).
set -euo pipefail
umask 022
BINARY= OUT= VERSION=0.0.0 NAME=ghcr.io/hostprep/hostprep SOURCE= LICENSE_ID=Apache-2.0
SRCDIR= WORK=
usage() { sed -n '5,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --binary) BINARY=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --version) VERSION=$2; shift 2 ;;
        --name) NAME=$2; shift 2 ;;
        --source) SOURCE=$2; shift 2 ;;
        --license) LICENSE_ID=$2; shift 2 ;;
        --source-dir) SRCDIR=$2; shift 2 ;;
        --work) WORK=$2; shift 2 ;;
        -h|--help) usage ;;
        *) echo "build-image: unknown argument '$1'" >&2; usage ;;
    esac
done
die() { echo "build-image: $*" >&2; exit 1; }
[ -n "$BINARY" ] && [ -n "$OUT" ] || usage
[ -x "$BINARY" ] || die "--binary $BINARY: not an executable (build it first: cmake --build build)"
for t in jq tar gzip sha256sum ldd strip; do
    command -v "$t" >/dev/null || die "$t not found (.ci/install-deps installs it)"
done

# --- what the image says about itself --------------------------------------------------------
REVISION=unknown
if [ -n "$SRCDIR" ] && git -C "$SRCDIR" rev-parse --verify -q HEAD >/dev/null 2>&1; then
    REVISION=$(git -C "$SRCDIR" rev-parse HEAD)
    : "${SOURCE_DATE_EPOCH:=$(git -C "$SRCDIR" log -1 --format=%ct HEAD)}"
fi
SDE=${SOURCE_DATE_EPOCH:-0}
[[ $SDE =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH='$SDE': not a number of seconds"
CREATED=$(date -u -d "@$SDE" +%Y-%m-%dT%H:%M:%SZ)
case $(uname -m) in
    x86_64) ARCH=amd64 ;;
    aarch64) ARCH=arm64 ;;
    *) die "no OCI architecture name for $(uname -m)" ;;
esac

if [ -z "$WORK" ]; then
    WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
else
    rm -rf "$WORK"; mkdir -p "$WORK"
fi
R=$WORK/rootfs L=$WORK/layout
mkdir -p "$R" "$L/blobs/sha256"

# --- the root file system ----------------------------------------------------------------------
mkdir -p "$R"/usr/sbin "$R"/usr/lib "$R"/usr/lib64 "$R"/usr/share/doc/hostprep \
         "$R"/etc "$R"/host "$R"/proc "$R"/sys "$R"/dev "$R"/run "$R"/tmp
ln -s usr/lib "$R/lib"
ln -s usr/lib64 "$R/lib64"
ln -s usr/sbin "$R/sbin"
strip --strip-debug --strip-unneeded -o "$R/usr/sbin/hostprep" "$BINARY"
chmod 0755 "$R/usr/sbin/hostprep"
if [ -n "$SRCDIR" ] && [ -f "$SRCDIR/LICENSE" ]; then
    install -m 0644 "$SRCDIR/LICENSE" "$R/usr/share/doc/hostprep/LICENSE"
fi
# Every library ldd resolves ("name => /path (addr)") and the loader ("/path (addr)"), copied
# (links followed) to the path the loader looks for: /usr + the path ldd printed, /lib/... and
# /usr/lib/... being one directory in merged /usr.
ldd_out=$(ldd "$BINARY") || die "ldd $BINARY failed"
# libkmod and libsystemd are opened with dlopen(3) (drivers/seam/kmod.cpp on the first module lookup,
# agent/service_notify.cpp when a service manager set NOTIFY_SOCKET), so ldd does not list them:
# they and the libraries they need are added by name (Debian 12: libkmod2, libsystemd0).
for soname in libkmod.so.2:libkmod2 libsystemd.so.0:libsystemd0; do
    lib=$(ldconfig -p 2>/dev/null | awk -v n="${soname%%:*}" '$1 == n && /x86-64/ && !k++ { print $NF }')
    [ -n "$lib" ] || die "${soname%%:*} not found by ldconfig -p (install ${soname#*:})"
    ldd_out+=$'\n'$'\t'"$lib (0x0)"$'\n'"$(ldd "$lib")" || die "ldd $lib failed"
done
if grep -q 'not found' <<<"$ldd_out"; then die "ldd: libraries not found:"$'\n'"$ldd_out"; fi
interp=
while read -r path; do
    [ -n "$path" ] || continue
    dest=$path
    case $dest in /usr/*) ;; *) dest=/usr$dest ;; esac
    mkdir -p "$R$(dirname "$dest")"
    cp -L "$path" "$R$dest"
    chmod 0755 "$R$dest"
    case $path in */ld-linux*) interp=$dest ;; esac
done < <(sed -n -e 's/^.*=> \(\/[^ ]*\) (0x.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p' <<<"$ldd_out" | sort -u)
[ -n "$interp" ] || die "ldd named no dynamic loader for $BINARY"
# The loader as PT_INTERP names it (/lib64/ld-linux-x86-64.so.2 -> usr/lib64/...): a link to the
# copy in the multiarch directory, as Debian has it.
pt_interp=$(readelf -l "$BINARY" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
if [ -n "$pt_interp" ]; then
    want=$pt_interp; case $want in /usr/*) ;; *) want=/usr$want ;; esac
    if [ "$want" != "$interp" ]; then
        mkdir -p "$R$(dirname "$want")"
        ln -sf "$(realpath --relative-to="$(dirname "$want")" -m "$interp")" "$R$want"
    fi
fi
chmod 1777 "$R/tmp"
chmod 0755 "$R/host" "$R/proc" "$R/sys" "$R/dev" "$R/run" "$R/etc"

# --- the layer: a sorted tar with fixed times and owners, gzip -n ---------------------------------
tarball() { # DIR OUT: the tree's entries, sorted, as a reproducible tar
    (cd "$1" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort) > "$WORK/entries"
    tar -C "$1" --no-recursion -T "$WORK/entries" --format=gnu --mtime="@$SDE" \
        --owner=0 --group=0 --numeric-owner -cf "$2"
}
blob() { # FILE -> moves it into blobs/sha256/<hex>, prints the hex
    local h; h=$(sha256sum "$1" | cut -d' ' -f1)
    mv "$1" "$L/blobs/sha256/$h"; echo "$h"
}
size() { stat -c %s "$L/blobs/sha256/$1"; }

tarball "$R" "$WORK/layer.tar"
DIFF_ID=$(sha256sum "$WORK/layer.tar" | cut -d' ' -f1)
gzip -n -9 -c "$WORK/layer.tar" > "$WORK/layer.tar.gz"
LAYER=$(blob "$WORK/layer.tar.gz")

# --- config, manifest, index ---------------------------------------------------------------------
jq -n -S -c --arg created "$CREATED" --arg arch "$ARCH" --arg diff "sha256:$DIFF_ID" \
    --arg version "$VERSION" --arg revision "$REVISION" --arg source "$SOURCE" \
    --arg license "$LICENSE_ID" '{
  created: $created, architecture: $arch, os: "linux",
  config: {
    Entrypoint: ["/usr/sbin/hostprep"], Cmd: ["--help"], WorkingDir: "/",
    Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
    Labels: ({
      "org.opencontainers.image.title": "hostprep",
      "org.opencontainers.image.description": "Node-side GPU host preparation agent (container, vm-passthrough, vm-vgpu)",
      "org.opencontainers.image.version": $version,
      "org.opencontainers.image.revision": $revision,
      "org.opencontainers.image.licenses": $license,
      "org.opencontainers.image.created": $created
    } + (if $source == "" then {} else {"org.opencontainers.image.source": $source} end))
  },
  rootfs: {type: "layers", diff_ids: [$diff]},
  history: [{created: $created, created_by: "systemd/image/build-image.sh"}]
}' > "$WORK/config.json"
CONFIG=$(blob "$WORK/config.json")

jq -n -S -c --arg config "sha256:$CONFIG" --argjson csize "$(size "$CONFIG")" \
    --arg layer "sha256:$LAYER" --argjson lsize "$(size "$LAYER")" '{
  schemaVersion: 2,
  mediaType: "application/vnd.oci.image.manifest.v1+json",
  config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $config, size: $csize},
  layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $layer, size: $lsize}]
}' > "$WORK/manifest.json"
MANIFEST=$(blob "$WORK/manifest.json")

# ref.name: the tag (skopeo's oci-archive:FILE:TAG); io.containerd.image.name: the full name
# `ctr images import` gives the image.
jq -n -S -c --arg m "sha256:$MANIFEST" --argjson msize "$(size "$MANIFEST")" \
    --arg arch "$ARCH" --arg tag "$VERSION" --arg name "$NAME:$VERSION" '{
  schemaVersion: 2,
  mediaType: "application/vnd.oci.image.index.v1+json",
  manifests: [{
    mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $m, size: $msize,
    platform: {architecture: $arch, os: "linux"},
    annotations: {"org.opencontainers.image.ref.name": $tag, "io.containerd.image.name": $name}
  }]
}' > "$L/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' > "$L/oci-layout"

mkdir -p "$(dirname "$OUT")"
tarball "$L" "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "sha256:$MANIFEST"
