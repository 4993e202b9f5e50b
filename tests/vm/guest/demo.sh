#!/bin/sh
# The "main job" demo: a node whose stand-in GPUs are on their host driver is moved to
# vm-passthrough and back, with preflight and status shown where the binary has them.
. /tests/lib.sh
for m in e1000e nvme snd_hda_intel standin; do modprobe $m 2>/dev/null; done
for i in 1 2 3 4 5 6 7 8 9 10; do [ "$(drv $HDA_C)" = snd_hda_intel ] && break; usleep 200000; done
modprobe vfio_iommu_type1   # vfio's softdep; busybox modprobe does not follow softdeps

IDS="--gpu-ids 1234:11e8 --host-driver standin"
GPUS=$EDU_A,$EDU_B,$EDU_C
banner() { echo; echo "=================== $*"; }
show() { echo "# $*"; "$@"; echo "# (exit $?)"; }
devices() {
    local b
    for b in $EDU_A $EDU_B $EDU_C $HDA_C $EDU_D $NIC_D; do
        echo "  $b $(cat $P/$b/vendor | cut -c3-):$(cat $P/$b/device | cut -c3-) group $(grp $b) driver $(drv $b)"
    done 2>/dev/null
}
has_cmd() { hostprep --help 2>&1 | grep -qE "^  $1( |$)"; }

banner "guest: $(uname -r), $(cat /proc/cmdline | tr ' ' '\n' | grep -E 'iommu' | tr '\n' ' ')"
show hostprep --version
show hostprep --help
banner "before"
devices

if has_cmd preflight; then
    banner "hostprep preflight"
    show hostprep preflight --mode vm-passthrough $IDS --devices $GPUS
else
    banner "hostprep preflight: not in this build, skipped"
fi

banner "hostprep prepare --mode vm-passthrough --dry-run"
show hostprep prepare --mode vm-passthrough --dry-run $IDS --devices $GPUS
banner "hostprep prepare --mode vm-passthrough"
show hostprep prepare --mode vm-passthrough $IDS --devices $GPUS
devices
echo "  /dev/vfio: $(ls /dev/vfio | tr '\n' ' ')"
for b in $EDU_A $EDU_B $EDU_C; do vfio-group-status --attach $(grp $b); done

if has_cmd status; then
    banner "hostprep status"
    show hostprep status $IDS --devices $GPUS
    show hostprep --output json status $IDS
else
    banner "hostprep status: not in this build, skipped"
fi

banner "again: nothing to do"
show hostprep prepare --mode vm-passthrough $IDS --devices $GPUS
banner "a group with a foreign device is refused"
show hostprep prepare --mode vm-passthrough $IDS --devices $EDU_D
banner "in use: a process holds /dev/standin (like nvidia-persistenced)"
hostprep prepare --mode container $IDS --devices $GPUS > /dev/null 2>&1
hold $(standin_node $EDU_A) &
sleep 1
show hostprep prepare --mode vm-passthrough $IDS --devices $EDU_A
kill %1 2>/dev/null; wait

banner "back: hostprep prepare --mode vm-passthrough, then --mode container"
show hostprep prepare --mode vm-passthrough $IDS --devices $GPUS
show hostprep prepare --mode container $IDS --devices $GPUS
devices
if has_cmd status; then show hostprep status $IDS --devices $GPUS; fi
echo
echo "demo: done"
