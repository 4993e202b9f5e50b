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

# status with the selection: converged in MODE, no drift, every selected device on its wanted
# driver.
nvs_expect_status() { # MODE
    local s
    hp_expect 0 --output json status $NVS_IDS --devices $NVS_DEVS
    s=$(tr -d ' \n' < $T/hp.out)
    case $s in *'"drift":[]'*) ;; *) die "status reports drift in $1: $(echo "$s" | grep -o '"drift":\[[^]]*\]' | head -c 400)" ;; esac
    case $s in *"\"actualMode\":\"$1\""*) ;; *) die "status: actualMode $(echo "$s" | grep -o '"actualMode":"[^"]*"'), expected $1" ;; esac
    case $s in *'"converged":true'*) ;; *) die "status: not converged in $1: $(echo "$s" | grep -o '"converged":[a-z]*')" ;; esac
    case $s in *'"onWantedDriver":false'*) die "status: a device is off its wanted driver in $1" ;; esac
}

# A run that must change nothing: "nothing to do", the same drivers and overrides, no kernel log.
nvs_expect_noop() { # MODE
    local d0
    pci_state > $T/nv.before; d0=$(kernel_log | wc -l)
    hp_expect 0 prepare --mode $1 $NVS_IDS --devices $NVS_DEVS
    grep -qi "nothing to do" $T/hp.out || die "$1 on a host already in $1 did not say 'nothing to do'"
    state_diff $T/nv.before > $T/sd.out || die "$1 on a host already in $1 changed: $(tr '\n' ';' < $T/sd.out)"
    [ "$(kernel_log | wc -l)" = "$d0" ] || die "$1 on a host already in $1 made the kernel log: $(kernel_log | tail -n +$((d0 + 1)) | head -3)"
}

# The round trip: GPU A and the switch from the host's drivers to vfio-pci and back, each to its
# own driver of module standin; a container run on the host as it is (and as it ends) is a no-op.
hp_t_nvswitch_round_trip() {
    local s
    modprobe vfio_iommu_type1
    expect_drv $EDU_A standin; expect_drv $NVSW standin-switch
    # 1. The host as it boots (GPU on standin, switch on standin-switch) is in container mode.
    nvs_expect_noop container
    nvs_expect_status container
    # 2. The switch is selected as an NVSwitch, not as a GPU.
    hp_expect 0 --output json prepare --mode vm-passthrough --dry-run $NVS_IDS --devices $NVS_DEVS
    s=$(tr -d ' \n' < $T/hp.out)
    echo "$s" | grep -q "\"bdf\":\"$NVSW\",[^{]*{[^}]*}[^}]*\"role\":\"nvswitch\"" \
        || die "the plan does not take $NVSW as role nvswitch: $(echo "$s" | head -c 600)"
    expect_boot_state "after the dry run"
    # 3. vm-passthrough: both on vfio-pci with the override, their groups viable and attachable.
    hp_expect 0 prepare --mode vm-passthrough $NVS_IDS --devices $NVS_DEVS
    expect_vfio_group $EDU_A
    expect_vfio_group $NVSW
    [ "$(ovr $NVSW)" = vfio-pci ] || die "$NVSW override '$(ovr $NVSW)', expected vfio-pci"
    [ -z "$(standin_node $NVSW)" ] || die "$NVSW on vfio-pci still has $(standin_node $NVSW)"
    expect_no_journal
    nvs_expect_status vm-passthrough
    # 4. Back: the plan verifies the module, not a driver name (the module has two drivers and
    #    the kernel picks), and the kernel gives the switch standin-switch and the GPU standin.
    hp_expect 0 --output json prepare --mode container --dry-run $NVS_IDS --devices $NVS_DEVS
    s=$(tr -d ' \n' < $T/hp.out)
    echo "$s" | grep -o "{[^{}]*\"bdf\":\"$NVSW\"[^{}]*}" | grep -q '"kind":"verify-module"' \
        || die "the container plan has no verify-module step for $NVSW: $(echo "$s" | grep -o '"steps":.*' | head -c 600)"
    hp_expect 0 prepare --mode container $NVS_IDS --devices $NVS_DEVS
    expect_drv $EDU_A standin "GPU A back from vfio-pci"
    expect_drv $NVSW standin-switch "the switch back from vfio-pci"
    [ "$(basename "$(readlink -f $P/$NVSW/driver)")" = standin-switch ] || die "$NVSW driver link $(readlink $P/$NVSW/driver)"
    [ "$(ovr $NVSW)" = "" ] && [ "$(ovr $EDU_A)" = "" ] || die "override left: $NVSW '$(ovr $NVSW)', $EDU_A '$(ovr $EDU_A)'"
    case $(standin_node $NVSW) in /dev/standin-switch[0-9]*) ;; *) die "no /dev/standin-switchN for $NVSW after container" ;; esac
    expect_no_journal
    nvs_expect_status container
    # 5. And container again changes nothing.
    nvs_expect_noop container
    expect_boot_state "after the round trip"
    note "$(uname -r): $EDU_A standin <-> vfio-pci, $NVSW standin-switch <-> vfio-pci; container on the host as it is: nothing to do"
}

# hostprep killed after each step of a switch (HOSTPREP_TEST_CRASH_AFTER_STEP, as
# crash_after_each_step_recovers), both directions, and standin-switch's probe refused on the way
# back: the journal puts the switch back on the driver it had, standin-switch or vfio-pci.
hp_t_nvswitch_faults() {
    local k n rp=/sys/module/standin/parameters/refuse_probe d0 pts=0
    modprobe vfio_iommu_type1
    pci_state > $T/nv.host
    # 1. To vfio-pci, killed after step k; the next run (container) rolls back to standin-switch.
    hp_expect 0 --output json prepare --mode vm-passthrough --dry-run $NVS_IDS --devices $NVSW
    n=$(grep -c '"kind"' $T/hp.out)
    [ "$n" -gt 2 ] || die "cannot count the plan's steps"
    k=0
    while [ $k -lt $n ]; do
        HOSTPREP_TEST_CRASH_AFTER_STEP=$k hp prepare --mode vm-passthrough $NVS_IDS --devices $NVSW
        [ "$HP_RC" = 137 ] || die "to vfio-pci, step $k: exit $HP_RC, expected death by SIGKILL (137)"
        hp_expect 0 prepare --mode container $NVS_IDS --devices $NVSW
        expect_no_journal
        state_diff $T/nv.host > $T/sd.out || die "killed after step $k to vfio-pci, then container: $(tr '\n' ';' < $T/sd.out)"
        k=$((k + 1)); pts=$((pts + 1))
    done
    # 2. From vfio-pci, killed after step k on the way back; the next run, container again, rolls
    #    back to vfio-pci and completes the switch: standin-switch (even k; odd k: the next run is
    #    vm-passthrough, which rolls back to vfio-pci, as the SIGKILL sweep alternates).
    hp_expect 0 prepare --mode vm-passthrough $NVS_IDS --devices $NVSW
    pci_state > $T/nv.vm
    hp_expect 0 --output json prepare --mode container --dry-run $NVS_IDS --devices $NVSW
    n=$(grep -c '"kind"' $T/hp.out)
    [ "$n" -gt 2 ] || die "cannot count the container plan's steps"
    k=0
    while [ $k -lt $n ]; do
        HOSTPREP_TEST_CRASH_AFTER_STEP=$k hp prepare --mode container $NVS_IDS --devices $NVSW
        [ "$HP_RC" = 137 ] || die "to standin-switch, step $k: exit $HP_RC, expected death by SIGKILL (137)"
        if [ $((k % 2)) = 0 ]; then
            hp_expect 0 prepare --mode container $NVS_IDS --devices $NVSW
            expect_no_journal
            state_diff $T/nv.host > $T/sd.out || die "killed after step $k back to the host, then container: $(tr '\n' ';' < $T/sd.out)"
        fi
        hp_expect 0 prepare --mode vm-passthrough $NVS_IDS --devices $NVSW
        expect_no_journal
        state_diff $T/nv.vm > $T/sd.out || die "killed after step $k back to the host, then vm-passthrough: $(tr '\n' ';' < $T/sd.out)"
        k=$((k + 1)); pts=$((pts + 1))
    done
    # 3. GPU A with it, and standin-switch refuses the switch's probe on the way back: exit 1,
    #    both back on vfio-pci as they were.
    hp_expect 0 prepare --mode vm-passthrough $NVS_IDS --devices $NVS_DEVS
    pci_state > $T/nv.vm2
    d0=$(dmesg | wc -l)
    echo $NVSW > $rp
    hp prepare --mode container $NVS_IDS --devices $NVS_DEVS
    echo > $rp
    [ "$HP_RC" = 1 ] || die "exit $HP_RC with standin-switch's probe of $NVSW refused, expected 1"
    grep -q "$NVSW" $T/hp.out || die "the error does not name $NVSW: $(tail -n 2 $T/hp.out | tr '\n' ' ')"
    dmesg | tail -n +$((d0 + 1)) | grep -q "standin-switch $NVSW.*probe refused" \
        || die "standin-switch never refused $NVSW's probe: $(dmesg | tail -n +$((d0 + 1)) | grep "$NVSW" | tail -n 3)"
    state_diff $T/nv.vm2 > $T/sd.out || die "refused probe: not rolled back to vfio-pci: $(tr '\n' ';' < $T/sd.out)"
    expect_no_journal
    hp_expect 0 prepare --mode container $NVS_IDS --devices $NVS_DEVS
    expect_drv $NVSW standin-switch; expect_drv $EDU_A standin
    expect_boot_state
    note "$(uname -r): $pts crash points on the switch (both directions), each rolled back to its driver; a refused probe rolled back to vfio-pci"
}
