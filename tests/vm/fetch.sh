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
#   apt-trixie/                   apt's own sources, lists and cache for a Debian 13 kernel (7.3)
#   kbuild-root/                  the Debian 13 root its modules are built in (build-kbuild-root.sh)
# Exit 77 (CTest skip) when a Debian 13 kernel cannot be reached or built for; 1 on other errors.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

CACHE=${HOSTPREP_VM_CACHE:-$HOME/.cache/hostprep-vm}
mkdir -p "$CACHE/debs" "$CACHE/stamps"
log() { echo "fetch: $*" >&2; }

# Which kernel: HOSTPREP_VM_KERNEL=6.1 (default) is the one linux-image-amd64 depends on right now;
# 6.12 is the newest linux-image-6.12.N+deb12-amd64-unsigned for which the headers, the -common
# headers and linux-kbuild of the same version exist too (bookworm-backports/-updates ship 6.12
# beside 6.1); 7.3 (any 7.x) is the newest linux-image-7.3.N+deb13-amd64 of Debian 13's
# trixie-backports with its split packages (linux-binary-, linux-modules-, linux-base-) and the
# same headers, -common and kbuild. All are resolved with apt-cache at run time, never pinned.
KSEL=${HOSTPREP_VM_KERNEL:-6.1}

# A Debian 13 kernel comes from the same archive as this machine's packages, through apt with a
# second sources list (trixie, trixie-backports) and state, cache and sources of its own under
# $CACHE/apt-trixie: the machine's apt lists and configuration are neither read nor changed, and
# nothing is installed from it (apt-get download, dpkg -x).
APT=()
case $KSEL in
    7.*)
        . "$HERE/mirror.sh"
        MIRROR=$(debian_mirror)
        A=$CACHE/apt-trixie
        mkdir -p "$A/state/lists/partial" "$A/cache/archives/partial" "$A/etc/sources.list.d" \
                 "$A/etc/preferences.d" "$A/etc/apt.conf.d"
        touch "$A/state/status"
        srcs="deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR trixie-backports main"
        [ "$(cat "$A/etc/sources.list" 2>/dev/null)" = "$srcs" ] || echo "$srcs" > "$A/etc/sources.list"
        APT=(-o "Dir::State=$A/state" -o "Dir::State::status=$A/state/status"
             -o "Dir::Cache=$A/cache" -o "Dir::Etc::sourcelist=$A/etc/sources.list"
             -o "Dir::Etc::sourceparts=$A/etc/sources.list.d"
             -o "Dir::Etc::preferences=$A/etc/preferences"
             -o "Dir::Etc::preferencesparts=$A/etc/preferences.d"
             -o "Dir::Etc::parts=$A/etc/apt.conf.d"
             -o "APT::Sandbox::User=$(id -un)") ;;
esac
apt_cache() { apt-cache ${APT[@]+"${APT[@]}"} "$@"; }
apt_get() { apt-get ${APT[@]+"${APT[@]}"} "$@"; }

# apt_update_once: the kernel's lists (this machine's, or $CACHE/apt-trixie's for a 7.x kernel);
# host_update_once: this machine's, for busybox-static and kmod.
updated=0
apt_update_once() {
    if [ "$updated" = 0 ]; then
        if [ ${#APT[@]} -gt 0 ]; then
            log "apt-get update of trixie, trixie-backports from $MIRROR (apt state in $A)"
            # Error-Mode=any: an index that failed to download fails the update (not a warning).
            if ! apt_get update -qq -o APT::Update::Error-Mode=any 2>"$A/update.log"; then
                cat "$A/update.log" >&2
                # Only an unreachable archive is a skip; a bad signature or the like is a failure.
                if grep -qiE 'Could not connect|Unable to connect|Temporary failure resolving|Could not resolve|Connection (refused|timed out)|Network is unreachable|No route to host' \
                        "$A/update.log"; then
                    [ -n "${UPDATE_SOFT:-}" ] || log "cannot reach trixie-backports at $MIRROR: skipping"
                    exit 77
                fi
                exit 1
            fi
            touch "$A/updated"
        else
            host_update_once
        fi
        updated=1
    fi
}
host_updated=0
host_update_once() {
    if [ "$host_updated" = 0 ]; then
        log "apt-get update"
        apt-get update -qq >&2
        host_updated=1
    fi
}

resolve_kernel() {
    case $KSEL in
        6.1)
            apt-cache depends linux-image-amd64 2>/dev/null \
                | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1 ;;
        7.*)
            # Debian 13 splits the kernel: linux-image-<abi>-amd64 (signed, a few bytes) depends on
            # linux-binary- (the kernel), linux-modules- and linux-base- (config, System.map,
            # modules.builtin*, modules.order) of the same ABI; all must exist, with the headers.
            local series=$KSEL abi pkgs p ok
            pkgs=$(apt_cache search --names-only "^linux-(image|binary|modules|base|headers|kbuild)-${series//./\\.}\\.[0-9]+" 2>/dev/null \
                | awk '{ print $1 }')
            for abi in $(echo "$pkgs" | sed -n "s/^linux-image-\(${series//./\\.}\.[0-9]*+deb[0-9]*\)-amd64$/\1/p" \
                         | sort -t. -k3,3nr); do
                ok=1
                for p in linux-binary-$abi-amd64 linux-modules-$abi-amd64 linux-base-$abi-amd64 \
                         linux-headers-$abi-amd64 linux-headers-$abi-common linux-kbuild-$abi; do
                    echo "$pkgs" | grep -qxF "$p" || ok=0
                done
                [ $ok = 0 ] || { echo "linux-image-$abi-amd64"; return; }
            done ;;
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
# The trixie lists are this script's alone (nothing else updates them): updated a day ago at most
# ($A/updated; apt dates the lists by the archive's Release), so the version it resolves is still
# in the archive's pool. Lists that are only old stay usable when the archive cannot be reached
# (the kernel they name may be in the cache).
if [ ${#APT[@]} -gt 0 ] && [ -z "$(find "$A/updated" -mmin -1440 2>/dev/null)" ]; then
    if [ -n "$(find "$A/state/lists" -maxdepth 1 -name '*_Packages*' 2>/dev/null)" ]; then
        rc=0; (UPDATE_SOFT=1; apt_update_once) || rc=$?
        case $rc in
            0) updated=1 ;;
            77) log "cannot reach trixie-backports at $MIRROR: going on with the lists from before" ;;
            *) exit "$rc" ;;
        esac
    else
        apt_update_once
    fi
fi
IMG_PKG=$(resolve_kernel || true)
if [ -z "$IMG_PKG" ]; then
    apt_update_once
    IMG_PKG=$(resolve_kernel)
fi
if [ -z "$IMG_PKG" ]; then
    case $KSEL in
        # The series left trixie-backports (a newer one replaced it): the suite cannot run.
        7.*) log "no Debian $KSEL kernel with its binary, modules, base, headers and kbuild in trixie-backports at $MIRROR: skipping"; exit 77 ;;
        *) log "cannot resolve a Debian $KSEL kernel with headers and kbuild"; exit 1 ;;
    esac
fi
KVER=${IMG_PKG#linux-image-}; KVER=${KVER%-unsigned}   # 6.1.0-57-amd64, 6.12.118+deb12-amd64
KABI=${KVER%-amd64}                           # 6.1.0-57, 6.12.118+deb12, 7.3.4+deb13
VER=$(apt_cache show "$IMG_PKG" | sed -n 's/^Version: //p' | head -n1)   # 6.1.192-3, 6.12.118-1~deb12u1, 7.3.4-1~bpo13+1
SERIES=$(echo "$KVER" | sed 's/^\([0-9]*\.[0-9]*\).*/\1/')           # 6.1, 6.12, 7.3
if [ "$SERIES" = 6.1 ]; then
    KBUILD_PKG=linux-kbuild-$SERIES         # 6.1's kbuild is per series, 6.12's per ABI
    SRC_VER=$VER
else
    KBUILD_PKG=linux-kbuild-$KABI
    # Only samples/vfio-mdev/mtty.c is taken from the source; its candidate is good enough.
    SRC_VER=$(apt_cache policy "linux-source-$SERIES" | sed -n 's/^ *Candidate: //p')
fi
BB_VER=$(apt-cache policy busybox-static | sed -n 's/^ *Candidate: //p')
# kmod's depmod writes the modules.*.bin indexes libkmod (hence hostprep) needs; busybox depmod
# writes text files only. Take kmod from the mirror too, so the host needs no kmod installed.
KMOD_VER=$(apt-cache policy kmod | sed -n 's/^ *Candidate: //p')

# The kernel's packages (from the kernel's apt), then busybox and kmod (from this machine's).
KPKGS=("$IMG_PKG=$VER" "linux-headers-$KVER=$VER" "linux-headers-$KABI-common=$VER"
       "$KBUILD_PKG=$VER" "linux-source-$SERIES=$SRC_VER")
case $SERIES in
    7.*) KPKGS+=("linux-binary-$KVER=$VER" "linux-modules-$KVER=$VER" "linux-base-$KVER=$VER") ;;
esac
HPKGS=("busybox-static=$BB_VER" "kmod=$KMOD_VER")

deb_path() { # pkg=ver -> expected file name in debs/ (epochs are encoded as %3a)
    local p=${1%%=*} v=${1#*=}
    ls "$CACHE/debs/${p}_${v/:/%3a}_"*.deb 2>/dev/null | head -n1
}

download() { # getter update pkg=ver...: the ones not in debs/ yet
    local get=$1 update=$2 pv missing=()
    shift 2
    for pv in "$@"; do
        [ -n "$(deb_path "$pv")" ] || missing+=("$pv")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    log "downloading ${missing[*]}"
    if ! (cd "$CACHE/debs" && $get download -q "${missing[@]}" >&2); then
        $update
        (cd "$CACHE/debs" && $get download -q "${missing[@]}" >&2)
    fi
}
download apt_get apt_update_once "${KPKGS[@]}"
download apt-get host_update_once "${HPKGS[@]}"

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
KBUILD_ROOT=
case $SERIES in
    7.*)
        # Debian 13: the kernel, its modules and linux-base's files under usr/lib/modules/<kver>/
        # (merged /usr: lib is a link to usr/lib, where kmod looks with -b); the headers and
        # kbuild go into the Debian 13 root the modules are built in, at their own paths.
        if [ ! -e "$stamp" ]; then
            log "unpacking kernel, modules into $KROOT"
            rm -rf "$KROOT"; mkdir -p "$KROOT"
            for pv in "linux-binary-$KVER=$VER" "linux-modules-$KVER=$VER" "linux-base-$KVER=$VER"; do
                dpkg -x "$(deb_path "$pv")" "$KROOT"
            done
            ln -s usr/lib "$KROOT/lib"
            "$DEPMOD" -b "$KROOT" "$KVER"      # dpkg -x runs no maintainer scripts
            touch "$stamp"
        fi
        KBUILD_ROOT=$("$HERE/build-kbuild-root.sh")      # exit 77 (skip) passes through
        if [ ! -e "$KBUILD_ROOT/.headers-$KVER-$VER" ]; then
            log "unpacking headers, kbuild of $KVER into $KBUILD_ROOT"
            for pv in "linux-headers-$KVER=$VER" "linux-headers-$KABI-common=$VER" "$KBUILD_PKG=$VER"; do
                dpkg -x "$(deb_path "$pv")" "$KBUILD_ROOT"
            done
            touch "$KBUILD_ROOT/.headers-$KVER-$VER"
        fi
        KIMAGE=$KROOT/usr/lib/modules/$KVER/vmlinuz
        KHEADERS=/usr/src/linux-headers-$KVER ;;      # inside $KBUILD_ROOT
    *)
        if [ ! -e "$stamp" ]; then
            log "unpacking kernel, headers, kbuild into $KROOT"
            rm -rf "$KROOT"; mkdir -p "$KROOT"
            for pv in "$IMG_PKG=$VER" "linux-headers-$KVER=$VER" "linux-headers-$KABI-common=$VER" \
                      "$KBUILD_PKG=$VER"; do
                dpkg -x "$(deb_path "$pv")" "$KROOT"
            done
            # The arch headers' Makefile includes the -common tree by absolute path; point it at
            # the cache.
            sed -i "s|^include /usr/src/|include $KROOT/usr/src/|" "$KROOT/usr/src/linux-headers-$KVER/Makefile"
            "$DEPMOD" -b "$KROOT" "$KVER"      # dpkg -x runs no maintainer scripts
            touch "$stamp"
        fi
        KIMAGE=$KROOT/boot/vmlinuz-$KVER
        KHEADERS=$KROOT/usr/src/linux-headers-$KVER ;;
esac

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
KIMAGE=$KIMAGE
KMODDIR=$KROOT/lib/modules/$KVER
KHEADERS=$KHEADERS
KBUILD_ROOT=$KBUILD_ROOT
MTTY_SRC=$SRC/samples/vfio-mdev/mtty.c
BUSYBOX=$BBROOT/bin/busybox
DEPMOD=$DEPMOD
KMODPROBE=$KMODROOT/bin/modprobe
EOT
mv "$ENV.tmp" "$ENV"
[ "$KSEL" != 6.1 ] || cp "$ENV" "$CACHE/current.env"
echo "$ENV"
