# Sourced by build-initramfs.sh and run-systemd-test.sh (after fetch.sh's env file, which sets
# KMODPROBE, KROOT, KVER, KMODDIR).
# copy_modules DEST MODULE...: the modules and everything they depend on, at their usual paths
# under DEST, plus the kernel's modules.builtin* and modules.order (depmod needs them).
# A module this kernel does not have (6.1's vfio_virqfd is part of vfio from 6.2 on) is skipped
# with a note; built-in ones need nothing. Compressed modules (Debian's 6.12 ships .ko.xz,
# CONFIG_MODULE_COMPRESS_XZ) are stored decompressed, so busybox's modprobe and insmod load them
# whatever their build supports.
copy_modules() {
    local dest=$1 ko rel m
    shift
    for m in "$@"; do
        "$KMODPROBE" -d "$KROOT" -S "$KVER" --show-depends "$m" 2>/dev/null \
            || echo "copy_modules: no module $m in $KVER, skipped" >&2
    done | awk '$1 == "insmod" { print $2 }' | sort -u | while read -r ko; do
        rel=${ko#"$KROOT"/}
        mkdir -p "$dest/$(dirname "$rel")"
        case $ko in
            *.ko.xz) xz -dc "$ko" > "$dest/${rel%.xz}" ;;
            *.ko.zst) zstd -qdc "$ko" > "$dest/${rel%.zst}" ;;
            *) cp "$ko" "$dest/$rel" ;;
        esac
    done
    mkdir -p "$dest/lib/modules/$KVER"
    cp "$KMODDIR"/modules.{builtin,builtin.modinfo,order} "$dest/lib/modules/$KVER/"
}
