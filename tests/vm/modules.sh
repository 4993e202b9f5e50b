# Sourced by build-initramfs.sh and run-systemd-test.sh (after fetch.sh's env file, which sets
# KMODPROBE, KROOT, KVER, KMODDIR).
# copy_modules DEST MODULE...: the modules and everything they depend on, at their usual paths
# under DEST, plus the kernel's modules.builtin* and modules.order (depmod needs them).
copy_modules() {
    local dest=$1 ko rel m
    shift
    for m in "$@"; do
        "$KMODPROBE" -d "$KROOT" -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
    done | sort -u | while read -r ko; do
        rel=${ko#"$KROOT"/}
        mkdir -p "$dest/$(dirname "$rel")"
        cp "$ko" "$dest/$rel"
    done
    mkdir -p "$dest/lib/modules/$KVER"
    cp "$KMODDIR"/modules.{builtin,builtin.modinfo,order} "$dest/lib/modules/$KVER/"
}
