# The NVSwitch on a real kernel (busybox sh; sourced by run_test with lib.sh and cases.sh).
#
# nvidia.ko registers two PCI drivers, "nvidia" for GPUs and "nvidia-nvswitch" for NVSwitches
# (NVSWITCH_DRIVER_NAME in NVIDIA/open-gpu-kernel-modules, kernel-open/nvidia/linux_nvswitch.h);
# standin.ko does the same: "standin" for the edu GPUs and "standin-switch" for QEMU's tpci200 at
# $NVSW, which plays the NVSwitch (class 0x0680, as an NVSwitch's). hostprep's default rule takes
# an NVSwitch as NVIDIA vendor + class 0x0680; the stand-in is vendor 1498, so it is selected the
# way the README gives for any other id: --gpu-ids names it, and its class makes it role nvswitch.
# `--host-driver standin` names the module: a function goes back to whichever of the module's
# drivers the kernel binds (verify-module), the GPU to standin and the switch to standin-switch.
NVS_IDS="--gpu-ids 1234:11e8,1498:30c8 --host-driver standin"
NVS_DEVS="$EDU_A,$NVSW"

# Kernel side, no hostprep: both drivers are the module's (their `module` links), each bound to
# its own device, and the switch goes to vfio-pci and back to standin-switch with nothing but
# drivers_probe choosing the driver (libvirt's way: override, unbind, drivers_probe).
t_standin_switch() {
    local d n g
    for d in standin standin-switch; do
        [ "$(basename "$(readlink /sys/bus/pci/drivers/$d/module)")" = standin ] \
            || die "/sys/bus/pci/drivers/$d/module is '$(readlink /sys/bus/pci/drivers/$d/module)', not module standin"
    done
    [ "$(cat $P/$NVSW/vendor):$(cat $P/$NVSW/device)" = 0x1498:0x30c8 ] || die "$NVSW is not the tpci200"
    [ "$(cat $P/$NVSW/class)" = 0x068000 ] || die "$NVSW class $(cat $P/$NVSW/class), expected 0x068000 (an NVSwitch's)"
    expect_drv $NVSW standin-switch
    expect_drv $EDU_A standin
    n=$(standin_node $NVSW)
    case $n in /dev/standin-switch[0-9]*) [ -c $n ] || die "$n is not a character device" ;;
        *) die "$NVSW: node '$n', expected /dev/standin-switchN" ;; esac
    modprobe vfio-pci
    modprobe vfio_iommu_type1
    g=$(grp $NVSW)
    vfio_bind $NVSW
    expect_drv $NVSW vfio-pci
    [ -z "$(standin_node $NVSW)" ] || die "$NVSW on vfio-pci still has $(standin_node $NVSW)"
    vfio-group-status --attach $g || die "group $g of $NVSW not usable"
    host_bind $NVSW
    expect_drv $NVSW standin-switch "after drivers_probe with no override"
    [ -n "$(standin_node $NVSW)" ] || die "no /dev/standin-switch node after rebind"
    note "$NVSW (1498:30c8 class 0x068000, group $g): standin-switch -> vfio-pci -> standin-switch; node $(standin_node $NVSW)"
}

