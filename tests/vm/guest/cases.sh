# Guest test cases (busybox sh). Each function runs in its own subshell under `set -e`; it fails
# with `die "why"`, skips with `skip "why"`. Kernel-only cases first, hostprep cases after.

# --- boot and topology ---------------------------------------------------------------------
t_iommu() {
    [ -e /sys/class/iommu/dmar0 ] || die "no /sys/class/iommu/dmar0"
    [ -e /sys/firmware/acpi/tables/DMAR ] || die "no DMAR table"
    [ -n "$(ls /sys/kernel/iommu_groups)" ] || die "no IOMMU groups"
    dmesg | grep -q "Enabled IRQ remapping" || die "interrupt remapping not enabled"
}

t_topology() {
    local b
    for b in $EDU_A $EDU_B $EDU_C $EDU_D $EDU_E $E1000E $NIC_D $HDA_C $NVME $PBRIDGE $OHCI_E $TESTDEV $NVSW; do
        [ -e $P/$b ] || die "missing $b"
        [ -n "$(grp $b)" ] || die "$b has no IOMMU group"
    done
    [ "$(grp $EDU_C)" = "$(grp $HDA_C)" ] || die "rp1 functions not in one group"
    [ "$(grp $EDU_D)" = "$(grp $NIC_D)" ] || die "rp2 functions not in one group"
    [ "$(grp $EDU_E)" = "$(grp $OHCI_E)" ] && [ "$(grp $EDU_E)" = "$(grp $PBRIDGE)" ] \
        || die "bridge group: bridge $(grp $PBRIDGE) edu $(grp $EDU_E) ohci $(grp $OHCI_E)"
    for b in $EDU_A $EDU_B $E1000E $NVME $TESTDEV $NVSW; do
        [ "$(ls /sys/kernel/iommu_groups/$(grp $b)/devices | wc -l)" = 1 ] || die "$b not alone in its group"
    done
    [ "$(ls /sys/kernel/iommu_groups/$(grp $EDU_C)/devices | wc -l)" = 2 ] || die "rp1 group size"
}

t_drivers() {
    expect_drv $E1000E e1000e
    expect_drv $NIC_D e1000e
    expect_drv $NVME nvme
    expect_drv $HDA_C snd_hda_intel
    expect_drv $TESTDEV ""
    expect_drv $OHCI_E ""
    expect_drv $NVSW standin-switch "the NVSwitch stand-in"
    local b n
    for b in $EDUS; do
        expect_drv $b standin
        n=$(standin_node $b)
        [ -n "$n" ] && [ -c "$n" ] || die "$b: no /dev/standin node"
    done
}

# --- standin behaves like nvidia ------------------------------------------------------------
t_standin_remove_blocks() {
    local n t0 t1
    n=$(standin_node $EDU_B)
    hold_start $n
    (echo $EDU_B > /sys/bus/pci/drivers/standin/unbind; echo done > $T/unbind.done) &
    sleep 1
    [ ! -e $T/unbind.done ] || die "unbind returned while $n was open"
    [ -e $n ] || die "$n vanished while remove() waits"
    # Kernel fact: __device_release_driver() removes the driver link *before* calling remove(),
    # so a hung unbind already looks driverless in sysfs.
    expect_drv $EDU_B "" "driver link during a blocked remove()"
    t0=$(now_ms)
    hold_stop
    i=0; while [ ! -e $T/unbind.done ] && [ $i -lt 30 ]; do usleep 100000; i=$((i + 1)); done
    t1=$(now_ms)
    [ -e $T/unbind.done ] || die "unbind did not finish after the holder closed"
    [ $((t1 - t0)) -lt 2000 ] || die "unbind took $((t1 - t0)) ms after close"
    [ ! -e $n ] || die "$n still present after remove"
    echo $EDU_B > /sys/bus/pci/drivers/standin/bind
    expect_drv $EDU_B standin
}

t_standin_remove_delay() {
    local t0 t1
    echo 1500 > /sys/module/standin/parameters/remove_delay_ms
    t0=$(now_ms)
    echo $EDU_B > /sys/bus/pci/drivers/standin/unbind
    t1=$(now_ms)
    echo 0 > /sys/module/standin/parameters/remove_delay_ms
    [ $((t1 - t0)) -ge 1400 ] || die "unbind took only $((t1 - t0)) ms with remove_delay_ms=1500"
    echo $EDU_B > /sys/bus/pci/drivers/standin/bind
    expect_drv $EDU_B standin
}

# --- kernel ABI facts hostprep relies on (Documentation/ABI/testing/sysfs-bus-pci, driver-api/vfio.rst) --------------------------------
t_abi_unbind_enodev() {
    [ "$(sysfs-write /sys/bus/pci/drivers/e1000e/unbind $EDU_A || true)" = ENODEV ] \
        || die "unbind from a driver the device is not bound to should be ENODEV"
    expect_drv $EDU_A standin
}

t_vfio_manual_round_trip() {
    local g
    # vfio's softdep on vfio_iommu_type1 is ignored by busybox modprobe; load it by hand.
    modprobe vfio-pci
    modprobe vfio_iommu_type1
    g=$(grp $EDU_A)
    vfio_bind $EDU_A
    expect_drv $EDU_A vfio-pci
    [ -c /dev/vfio/$g ] || die "/dev/vfio/$g missing"
    vfio-group-status --attach $g || die "group $g not usable"
    host_bind $EDU_A
    expect_drv $EDU_A standin
    [ -n "$(standin_node $EDU_A)" ] || die "no /dev/standin node after rebind"
}

t_vfio_group_not_viable() {
    local g
    modprobe vfio-pci
    modprobe vfio_iommu_type1
    g=$(grp $EDU_C)
    vfio_bind $EDU_C
    expect_drv $EDU_C vfio-pci
    expect_drv $HDA_C snd_hda_intel
    set +e; vfio-group-status $g; rc=$?; set -e
    [ $rc = 1 ] || die "group $g with snd_hda_intel member: helper exit $rc, expected 1 (not viable)"
    vfio_bind $HDA_C
    vfio-group-status --attach $g || die "group $g still not viable with both on vfio-pci"
    host_bind $HDA_C
    host_bind $EDU_C
    expect_drv $EDU_C standin
    wait_drv $HDA_C snd_hda_intel 30 || die "$HDA_C not back on snd_hda_intel"
}

t_abi_probe_nothing_binds() {
    # drivers_probe succeeds although vfio-pci refuses a bridge: only the driver link tells.
    echo vfio-pci > $P/$PBRIDGE/driver_override
    r=$(sysfs-write /sys/bus/pci/drivers_probe $PBRIDGE || true)
    echo > $P/$PBRIDGE/driver_override
    [ "$r" = OK ] || die "drivers_probe returned $r"
    expect_drv $PBRIDGE "" "bridge must not bind to vfio-pci"
}

# --- where 6.1 and 6.12 differ, and where they do not ------------------------------------------
# blocks PATH: does a read of PATH wait (2 s) while the device's unbind is pending? (The reader
# is left behind in the kernel until the lock goes; its output goes nowhere.)
blocks() {
    rm -f $T/rd.done
    (cat $1 > /dev/null 2>&1; echo > $T/rd.done) > /dev/null 2>&1 &
    local i=0
    while [ ! -e $T/rd.done ] && [ $i -lt 20 ]; do usleep 100000; i=$((i + 1)); done
    [ -e $T/rd.done ] && echo no || echo yes
}
# Each fact is asserted for the kernel that runs (6.1, 6.12 or 7.3, from uname -r) and printed as
# a note; hostprep's code handles each (see tests/vm/README.md, "6.1, 6.12 and 7.3").
t_kernel_differences() {
    local r n k vf
    case $(uname -r) in 6.1.*) k=6.1 ;; 6.12.*) k=6.12 ;; 7.3.*) k=7.3 ;; *) k=other ;; esac
    modprobe vfio-pci
    # 1. The errno of refused binds (the same on both).
    r=$(sysfs-write /sys/bus/pci/drivers/vfio-pci/bind $PBRIDGE || true)
    [ "$r" = ENODEV ] || die "bind a bridge to vfio-pci without an override: $r, expected ENODEV"
    echo vfio-pci > $P/$PBRIDGE/driver_override
    r=$(sysfs-write /sys/bus/pci/drivers/vfio-pci/bind $PBRIDGE || true)
    echo > $P/$PBRIDGE/driver_override
    [ "$r" = EINVAL ] || die "bind a bridge to vfio-pci with the override: $r, expected EINVAL"
    r=$(sysfs-write /sys/bus/pci/drivers/vfio-pci/bind $EDU_A || true)
    [ "$r" = ENODEV ] || die "bind a device bound elsewhere: $r, expected ENODEV"
    echo vfio-pci > $P/$TESTDEV/driver_override
    r=$(sysfs-write /sys/bus/pci/drivers/e1000e/bind $TESTDEV || true)
    echo > $P/$TESTDEV/driver_override
    [ "$r" = ENODEV ] || die "bind against driver_override: $r, expected ENODEV"
    echo 0 > $P/$NVME/sriov_drivers_autoprobe
    echo 1 > $P/$NVME/sriov_numvfs
    echo vfio-pci > $P/$NVME/driver_override
    echo $NVME > /sys/bus/pci/drivers/nvme/unbind
    r=$(sysfs-write /sys/bus/pci/drivers/vfio-pci/bind $NVME || true)
    echo > $P/$NVME/driver_override
    echo $NVME > /sys/bus/pci/drivers_probe
    wait_drv $NVME nvme 30 || die "nvme PF not back on nvme"
    echo 0 > $P/$NVME/sriov_numvfs
    [ "$r" = EBUSY ] || die "bind a PF with VFs to vfio-pci: $r, expected EBUSY"
    note "$k: refused binds: bridge ENODEV (no override) / EINVAL (override), bound elsewhere ENODEV, against the override ENODEV, PF with VFs EBUSY"
    # 2. VF probing with autoprobe on: 6.1 binds the VF inside the sriov_numvfs write; 6.12 and
    #    7.3 return before (QEMU's nvme VF then fails its init on all and is left driverless).
    echo 1 > $P/$NVME/sriov_drivers_autoprobe
    echo 1 > $P/$NVME/sriov_numvfs
    vf=$(basename $(readlink $P/$NVME/virtfn0))
    r=$(drv $vf)
    sleep 2
    echo 0 > $P/$NVME/sriov_numvfs
    case $k in
        6.1) [ "$r" = nvme ] || die "6.1: VF driver right after sriov_numvfs=1: '$r', expected nvme" ;;
        6.12|7.3) [ -z "$r" ] || die "$k: VF driver right after sriov_numvfs=1: '$r', expected none yet" ;;
    esac
    note "$k: VF driver when sriov_numvfs=1 returns (autoprobe on): '${r:-none}'"
}
# The device lock (a test of its own: it starts from a quiet node, as standin's own tests do).
t_kernel_differences_lock() {
    local r u n k
    case $(uname -r) in 6.1.*) k=6.1 ;; 6.12.*) k=6.12 ;; 7.3.*) k=7.3 ;; *) k=other ;; esac
    # 3. During a blocked unbind: the driver link is gone on both; reads of uevent and
    #    driver_override wait for the device lock on 6.1, and return at once on 6.12 and 7.3,
    #    where uevent still says DRIVER=standin (hostprep's sign of a running unbind there).
    n=$(standin_node $EDU_B)
    rm -f $T/unbind.done    # standin.remove_blocks_while_open leaves its own behind
    hold_start $n
    (echo $EDU_B > /sys/bus/pci/drivers/standin/unbind; echo done > $T/unbind.done) &
    sleep 1
    [ ! -e $T/unbind.done ] || die "unbind returned while $n was open"
    expect_drv $EDU_B "" "driver link during a blocked remove()"
    r=$(blocks $P/$EDU_B/driver_override)
    u=$(blocks $P/$EDU_B/uevent)
    case $k in
        6.1) [ $r = yes ] || die "6.1: a read of driver_override did not wait for the device lock"
             [ $u = yes ] || die "6.1: a read of uevent did not wait for the device lock" ;;
        6.12|7.3) [ $r = no ] || die "$k: a read of driver_override waited for the device lock"
              [ $u = no ] || die "$k: a read of uevent waited for the device lock"
              grep -qx DRIVER=standin $P/$EDU_B/uevent \
                  || die "$k: uevent during a blocked remove(): $(tr '\n' ' ' < $P/$EDU_B/uevent)" ;;
    esac
    [ "$(blocks $P/$EDU_B/vendor)" = no ] || die "a read of vendor waited for the device lock"
    note "$k: blocked unbind: driver link gone; reads wait for the device lock: driver_override $r, uevent $u"
    hold_stop
    i=0; while [ ! -e $T/unbind.done ] && [ $i -lt 30 ]; do usleep 100000; i=$((i + 1)); done
    [ -e $T/unbind.done ] || die "unbind did not finish after the holder closed"
    grep -q '^DRIVER=' $P/$EDU_B/uevent && die "uevent still names a driver after remove()"
    echo $EDU_B > /sys/bus/pci/drivers/standin/bind
    expect_drv $EDU_B standin
}
t_kernel_differences_vfio_dev() {
    local r k cdev iommufd
    case $(uname -r) in 6.1.*) k=6.1 ;; 6.12.*) k=6.12 ;; 7.3.*) k=7.3 ;; *) k=other ;; esac
    modprobe vfio-pci
    # 4. VFIO device files: vfio-dev/vfioN on all, a `dev` number and /dev/vfio/devices/vfioN
    #    only with CONFIG_VFIO_DEVICE_CDEV, which needs CONFIG_IOMMUFD: Debian 12's 6.12 and
    #    Debian 13's 7.3 have neither (so no /dev/iommu), like 6.1.
    vfio_bind $EDU_A
    expect_drv $EDU_A vfio-pci
    r=$(ls $P/$EDU_A/vfio-dev 2>/dev/null | tr '\n' ' ')
    case "$r" in vfio[0-9]*) ;; *) host_bind $EDU_A; die "no vfio-dev/vfioN under $EDU_A: '$r'" ;; esac
    if [ -e $P/$EDU_A/vfio-dev/${r% }/dev ]; then cdev=yes; else cdev=no; fi
    [ -e /dev/iommu ] && iommufd=yes || iommufd=no
    host_bind $EDU_A
    expect_drv $EDU_A standin
    [ $cdev = no ] || [ -e /dev/vfio/devices ] || die "vfio-dev has a dev number, /dev/vfio/devices is missing"
    # Debian builds none of them with CONFIG_IOMMUFD (6.1, 6.12, 7.3: their config files).
    case $k in
        6.1|6.12|7.3) [ $cdev = no ] && [ $iommufd = no ] \
            || die "$k: built without CONFIG_IOMMUFD, yet device file $cdev, /dev/iommu $iommufd" ;;
    esac
    note "$k: vfio-dev/${r% } on vfio-pci; device file: $cdev; /dev/iommu: $iommufd"
}

# --- SR-IOV on the nvme PF --------------------------------------------------------------------
t_sriov() {
    local f=$P/$NVME/sriov_numvfs r
    [ "$(cat $P/$NVME/sriov_totalvfs)" = 4 ] || die "sriov_totalvfs=$(cat $P/$NVME/sriov_totalvfs)"
    echo 0 > $P/$NVME/sriov_drivers_autoprobe
    r=$(sysfs-write $f 2 || true); [ $r = OK ] || die "enable 2 VFs: $r"
    [ "$(cat $f)" = 2 ] || die "sriov_numvfs reads $(cat $f)"
    [ -e $P/$NVME/virtfn0 ] && [ -e $P/$NVME/virtfn1 ] && [ ! -e $P/$NVME/virtfn2 ] || die "virtfn links"
    vf=$(basename $(readlink $P/$NVME/virtfn0))
    [ -z "$(drv $vf)" ] || die "VF $vf bound to $(drv $vf) with autoprobe off"
    [ -n "$(grp $vf)" ] || die "VF $vf has no IOMMU group"
    r=$(sysfs-write $f 3 || true); [ $r = EBUSY ] || die "2 -> 3 VFs: $r, expected EBUSY"
    r=$(sysfs-write $f 5 || true); [ $r = ERANGE ] || die "5 VFs (> total 4): $r, expected ERANGE"
    r=$(sysfs-write $f 0 || true); [ $r = OK ] || die "disable: $r"
    [ ! -e $P/$NVME/virtfn0 ] || die "virtfn0 still there"
    r=$(sysfs-write $f 4 || true); [ $r = OK ] || die "enable 4: $r"
    r=$(sysfs-write $f 0 || true); [ $r = OK ] || die "disable: $r"
    # no PF driver -> ENOENT
    echo $NVME > /sys/bus/pci/drivers/nvme/unbind
    r=$(sysfs-write $f 1 || true)
    echo $NVME > /sys/bus/pci/drivers/nvme/bind
    [ $r = ENOENT ] || die "enable without a PF driver: $r, expected ENOENT"
    expect_drv $NVME nvme
    echo 1 > $P/$NVME/sriov_drivers_autoprobe
}

t_sriov_vfio_refuses_pf() {
    # vfio-pci will not take a PF whose VFs are enabled: the probe fails, drivers_probe does not.
    local f=$P/$NVME/sriov_numvfs r
    modprobe vfio-pci
    echo 0 > $P/$NVME/sriov_drivers_autoprobe
    echo 1 > $f
    vfio_bind $NVME
    got=$(drv $NVME)
    dmesg | tail -n 20 | grep -q "Cannot bind to PF with SR-IOV enabled" || echo "(no vfio-pci message in dmesg)"
    numvfs=$(cat $f)
    host_bind $NVME
    wait_drv $NVME nvme 30 || die "nvme PF not back on nvme"
    echo 0 > $f 2>/dev/null || true
    echo 1 > $P/$NVME/sriov_drivers_autoprobe
    [ -z "$got" ] || die "PF with VFs ended on '$got', expected no driver"
    note "sriov_numvfs after unbinding nvme from the PF: $numvfs (the PF driver's remove does not disable VFs)"
}

# --- mdev on mtty -----------------------------------------------------------------------------
t_mdev() {
    local types t u avail r
    modprobe mtty
    types=/sys/class/mdev_bus/mtty/mdev_supported_types
    [ -d $types ] || die "no $types"
    t=$(ls -d $types/*-1 | head -n1)
    [ -n "$t" ] || die "no single-port type under $types: $(ls $types)"
    [ "$(cat $t/name)" = "Single port serial" ] || die "type name '$(cat $t/name)'"
    [ "$(cat $t/device_api)" = vfio-pci ] || die "device_api '$(cat $t/device_api)'"
    avail=$(cat $t/available_instances)
    u=$(cat /proc/sys/kernel/random/uuid)
    r=$(sysfs-write $t/create $u || true); [ $r = OK ] || die "create: $r"
    [ -d /sys/bus/mdev/devices/$u ] || die "mdev $u not on the mdev bus"
    [ "$(cat $t/available_instances)" = $((avail - 1)) ] || die "available_instances did not count down"
    [ "$(basename $(readlink /sys/bus/mdev/devices/$u/mdev_type))" = "$(basename $t)" ] || die "mdev_type link"
    [ -e $t/devices/$u ] || die "$t/devices/$u missing"
    g=$(basename $(readlink /sys/bus/mdev/devices/$u/iommu_group))
    [ -c /dev/vfio/$g ] || die "/dev/vfio/$g missing for the mdev"
    r=$(sysfs-write $t/create $u || true); [ $r = EEXIST ] || die "create twice: $r, expected EEXIST"
    r=$(sysfs-write $t/create not-a-uuid || true); [ $r = EINVAL ] || die "bad uuid: $r, expected EINVAL"
    r=$(sysfs-write /sys/bus/mdev/devices/$u/remove 1 || true); [ $r = OK ] || die "remove: $r"
    [ ! -e /sys/bus/mdev/devices/$u ] || die "mdev still present"
    [ "$(cat $t/available_instances)" = $avail ] || die "available_instances not restored"
    rmmod mtty
}

# --- hostprep ----------------------------------------------------------------------------------
hp_t_runs() {
    hp_expect 0 --version
    hp_expect 0 --help
    hp_expect 2 prepare --mode no-such-mode
}

# preflight: the IOMMU checks must pass on this guest (KVM cannot: TCG offers no /dev/kvm, so the
# overall verdict is not asserted).
hp_t_preflight() {
    hp preflight --mode vm-passthrough $HP_IDS --devices $EDU_A,$EDU_B,$EDU_C --color never
    [ "$HP_RC" = 0 ] || [ "$HP_RC" = 1 ] || die "exit $HP_RC"
    # "IOMMU kernel argument": QEMU's VT-d (a DMAR table) under TCG's CPU model, whatever its
    # vendor string, needs intel_iommu=on, which this guest has.
    for c in "IOMMU in firmware" "IOMMU enabled by the kernel" "IOMMU kernel argument" "Interrupt remapping" \
             "VFIO modules" "IOMMU group isolation" "GPUs present"; do
        grep -qE "^PASS +$c" $T/hp.out || die "check '$c' did not PASS: $(grep -E "^[A-Z]+ +$c" $T/hp.out)"
    done
    # No Debian kernel has iommufd or VFIO device files: INFO, never a failure.
    grep -qE "^INFO +iommufd and VFIO device files" $T/hp.out \
        || die "iommufd check is not INFO: $(grep -E "^[A-Z]+ +iommufd" $T/hp.out)"
    # A Debian 13 kernel's config is in lib/modules/<release>/ alone (build-initramfs.sh puts it
    # there): preflight reads it and says CONFIG_IOMMUFD is not set.
    if [ -e /lib/modules/$(uname -r)/config ]; then
        grep -E "^INFO +iommufd" $T/hp.out \
            | grep -qF "CONFIG_IOMMUFD not set, CONFIG_VFIO_DEVICE_CDEV not set in lib/modules/$(uname -r)/config" \
            || die "iommufd check does not read lib/modules/$(uname -r)/config: $(grep -E "^[A-Z]+ +iommufd" $T/hp.out)"
    fi
    note "$(grep -E '^[A-Z]+ +iommufd' $T/hp.out)"
    hp preflight --mode vm-passthrough $HP_IDS --devices $EDU_D --color never
    [ "$HP_RC" = 1 ] || die "preflight for $EDU_D (foreign device in its group): exit $HP_RC, expected 1"
    grep -qE "^FAIL +IOMMU group isolation.*$NIC_D" $T/hp.out || die "group isolation did not FAIL naming $NIC_D"
    expect_boot_state
}

hp_t_dry_run() {
    hp_expect 0 prepare --mode vm-passthrough --dry-run $HP_IDS --devices $EDU_A,$EDU_C
    grep -q "$HDA_C" $T/hp.out || die "dry run does not list the companion $HDA_C"
    expect_boot_state "after a dry run"
    expect_no_journal
}

hp_t_round_trip() {
    # Start with no VFIO module loaded: hostprep loads vfio-pci with libkmod, which must also
    # bring in vfio_iommu_type1 (a softdep of vfio), or no VMM could attach the group.
    rmmod vfio_pci vfio_pci_core vfio_iommu_type1 vfio_virqfd mdev vfio 2>/dev/null || true
    ! grep -qE '^(vfio_pci|vfio_iommu_type1) ' /proc/modules || note "could not unload vfio modules first"
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $EDU_A,$EDU_B
    grep -q '^vfio_pci ' /proc/modules || die "vfio_pci not loaded by hostprep"
    grep -q '^vfio_iommu_type1 ' /proc/modules || die "vfio_iommu_type1 (softdep of vfio) not loaded: groups cannot be attached"
    expect_vfio_group $EDU_A
    expect_vfio_group $EDU_B
    expect_drv $EDU_C standin "unselected $EDU_C"
    expect_no_journal
    hp_expect 0 prepare --mode container $HP_IDS --devices $EDU_A,$EDU_B
    expect_drv $EDU_A standin; expect_drv $EDU_B standin
    [ -n "$(standin_node $EDU_A)" ] || die "no /dev/standin node for $EDU_A after container"
    expect_boot_state "after the round trip"
    expect_no_journal
}

hp_t_status() {
    local d=$EDU_A,$EDU_B
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $d
    hp_expect 0 --output json status $HP_IDS --devices $d
    grep -q '"actualMode": "vm-passthrough"' $T/hp.out || die "status: actualMode is not vm-passthrough"
    grep -q '"converged": true' $T/hp.out || die "status: not converged after prepare"
    # iommufd and the VFIO device files: published exactly where the kernel has them (no Debian
    # kernel does: CONFIG_IOMMUFD is off in 6.1, 6.12 and 7.3, so no vfioDevice, iommufd false).
    [ -e /dev/iommu ] && want=true || want=false
    grep -q "\"iommufd\": $want" $T/hp.out || die "status: iommufd is not $want"
    for b in $EDU_A $EDU_B; do
        v=$(ls $P/$b/vfio-dev 2>/dev/null | head -n1)
        [ -n "$v" ] || die "$b on vfio-pci has no vfio-dev entry"
        if [ -e $P/$b/vfio-dev/$v/dev ]; then
            grep -q "\"vfioDevice\": \"/dev/vfio/devices/$v\"" $T/hp.out || die "status: no vfioDevice $v for $b"
        fi
    done
    if ! ls $P/$EDU_A/vfio-dev/*/dev > /dev/null 2>&1; then
        grep -q '"vfioDevice"' $T/hp.out && die "status: vfioDevice on a kernel without VFIO device files"
    fi
    note "$(uname -r): iommufd $want, vfioDevice $(grep -c '"vfioDevice"' $T/hp.out) devices"
    hp_expect 0 prepare --mode container $HP_IDS --devices $d
    hp_expect 0 --output json status $HP_IDS --devices $d
    grep -q '"actualMode": "container"' $T/hp.out || die "status: actualMode is not container"
    expect_boot_state
}

hp_t_idempotent() {
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $EDU_A
    pci_state > $T/s1; d1=$(kernel_log | wc -l)
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $EDU_A
    grep -qi "nothing to do" $T/hp.out || die "second vm-passthrough run did not say 'nothing to do'"
    state_diff $T/s1 > $T/sd.out || die "second run changed: $(tr '\n' ';' < $T/sd.out)"
    [ "$(kernel_log | wc -l)" = "$d1" ] || die "second run made the kernel log: $(kernel_log | tail -n +$((d1 + 1)) | head -3)"
    hp_expect 0 prepare --mode container $HP_IDS --devices $EDU_A
    hp_expect 0 prepare --mode container $HP_IDS --devices $EDU_A
    grep -qi "nothing to do" $T/hp.out || die "second container run did not say 'nothing to do'"
    expect_boot_state
}

hp_t_shared_group() {
    modprobe vfio_iommu_type1
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $EDU_C
    expect_drv $HDA_C vfio-pci "companion $HDA_C (same IOMMU group)"
    expect_vfio_group $EDU_C
    back_to_container $EDU_C
    wait_drv $HDA_C snd_hda_intel 30 || die "$HDA_C not back on snd_hda_intel: '$(drv $HDA_C)'"
    expect_boot_state
}

hp_t_bridge_group() {
    modprobe vfio_iommu_type1
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $EDU_E
    expect_drv $OHCI_E vfio-pci "USB companion behind the bridge"
    expect_drv $PBRIDGE "" "the pcie-pci-bridge"
    [ "$(ovr $PBRIDGE)" = "" ] || die "bridge got driver_override '$(ovr $PBRIDGE)'"
    expect_vfio_group $EDU_E
    back_to_container $EDU_E
    expect_boot_state
}

hp_t_foreign_refused() {
    hp_expect 3 prepare --mode vm-passthrough $HP_IDS --devices $EDU_D
    grep -q "$NIC_D" $T/hp.out || die "refusal does not name the foreign device $NIC_D"
    expect_boot_state "after the refusal"
    # The default selection (every edu) includes EDU_D: the whole run is refused, nothing moves.
    hp_expect 3 prepare --mode vm-passthrough $HP_IDS
    expect_boot_state "after refusing the full selection"
    expect_no_journal
}

hp_t_in_use() {
    local n
    n=$(standin_node $EDU_A)
    hold_start $n
    hp_bg 300 prepare --mode vm-passthrough $HP_IDS --devices $EDU_A
    if [ -z "$HP_RC" ]; then
        hold_stop; wait $HP_PID || true
        die "hostprep still running after 30 s while $n was held (blocked in unbind?)"
    fi
    [ "$HP_RC" = 3 ] || die "exit $HP_RC, expected 3"
    grep -q "pid $HOLD_PID" $T/hp.out || die "output does not name the holder pid $HOLD_PID"
    note "refused in $HP_MS ms"
    hold_stop
    expect_boot_state "after the in-use refusal"
    expect_no_journal
}

hp_t_mid_plan_failure() {
    # A real fault sweep: on the way back to the host driver, standin's probe() refuses one
    # device (its refuse_probe parameter: a real -EIO from a real probe) while the others move.
    # For each device in turn hostprep must put every device back on vfio-pci exactly as it was,
    # and leave no journal. C brings its audio companion, so the plan has 4 functions.
    local rp=/sys/module/standin/parameters/refuse_probe devs=$EDU_A,$EDU_B,$EDU_C victim n=0
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $devs
    pci_state > $T/s1
    for victim in $EDU_A $EDU_B $EDU_C; do
        d0=$(dmesg | wc -l)
        echo $victim > $rp
        hp prepare --mode container $HP_IDS --devices $devs
        echo > $rp
        [ "$HP_RC" = 1 ] || die "exit $HP_RC with $victim's probe refused, expected 1"
        grep -q "$victim" $T/hp.out || die "the error does not name $victim: $(tail -n 2 $T/hp.out | tr '\n' ' ')"
        dmesg | tail -n +$((d0 + 1)) | grep -q "$victim.*probe refused" \
            || die "standin never refused $victim's probe (the plan did not reach it?)"
        state_diff $T/s1 > $T/sd.out || die "$victim refused: not rolled back: $(tr '\n' ';' < $T/sd.out)"
        expect_no_journal
        n=$((n + 1))
    done
    note "$n fault points (a refused probe per device), 0 stranded"
    back_to_container $devs
    wait_drv $HDA_C snd_hda_intel 30 || true
    expect_boot_state
}

# The nvme PF with one VF on vfio-pci (sriov_drivers_autoprobe 0), as a VM's passthrough VF is:
# sets the caller's $vf.
nvme_vf_on_vfio() {
    modprobe vfio-pci
    echo 0 > $P/$NVME/sriov_drivers_autoprobe
    echo 1 > $P/$NVME/sriov_numvfs
    vf=$(readlink $P/$NVME/virtfn0); vf=${vf##*/}
    vfio_bind $vf
    expect_drv $vf vfio-pci "the VF after vfio_bind"
}

hp_t_vf_in_use() {
    # A PF (the nvme, standing in for a GPU) whose VF a VM could be using (bound to vfio-pci):
    # vm-passthrough must disable SR-IOV first (vfio-pci refuses a PF with VFs), which would
    # yank the VF, so hostprep refuses before anything changes. With the VF free, the PF moves
    # and its VFs go.
    local vf ids="--gpu-ids 1b36:0010 --host-driver nvme"
    nvme_vf_on_vfio
    pci_state > $T/s1
    hp_expect 3 prepare --mode vm-passthrough $ids --devices $NVME
    grep -q "$vf (VF of $NVME) on vfio-pci" $T/hp.out || die "the refusal does not name the VF"
    state_diff $T/s1 > $T/sd.out || die "changed although refused: $(tr '\n' ';' < $T/sd.out)"
    [ "$(cat $P/$NVME/sriov_numvfs)" = 1 ] || die "the VF is gone although refused"
    expect_no_journal
    # Free the VF: now the plan disables SR-IOV, and the PF goes to vfio-pci.
    echo > $P/$vf/driver_override
    echo $vf > /sys/bus/pci/drivers/vfio-pci/unbind
    hp_expect 0 prepare --mode vm-passthrough $ids --devices $NVME
    expect_drv $NVME vfio-pci
    [ "$(cat $P/$NVME/sriov_numvfs)" = 0 ] || die "sriov_numvfs $(cat $P/$NVME/sriov_numvfs) after the move"
    hp_expect 0 prepare --mode container $ids --devices $NVME
    wait_drv $NVME nvme 30 || die "nvme PF on '$(drv $NVME)' after container mode"
    echo 1 > $P/$NVME/sriov_drivers_autoprobe
    expect_no_journal
    expect_boot_state
}

hp_t_vgpu_mtty() {
    # vm-vgpu through the real kernel's mdev core: mtty's mdev parent on stand-in GPU A (the
    # harness's mtty takes parent=BDF, see tests/vm/mtty-pci-parent.pl), its types named in a
    # vgpu-device-manager config. The mdev core names a type directory after the parent's driver,
    # as with nvidia's "nvidia-222": here "standin-1" (Single port serial) and "standin-2" (Dual
    # port serial). Both names end in "serial", the token vgpu-device-manager would match on, so
    # the config names the directories.
    local cfg=$T/vgpu.yaml ids="$HP_IDS --devices $EDU_A" types=$P/$EDU_A/mdev_supported_types
    local u g dev=/sys/bus/mdev/devices t1 t2
    vgpus() { ls $dev 2>/dev/null | sort; }
    modprobe mtty parent=$EDU_A
    [ -e /sys/class/mdev_bus/$EDU_A ] || die "$EDU_A is not in /sys/class/mdev_bus"
    t1=$(grep -l "^Single port serial$" $types/*/name | head -n1); t1=$(basename $(dirname "$t1"))
    t2=$(grep -l "^Dual port serial$" $types/*/name | head -n1); t2=$(basename $(dirname "$t2"))
    [ "$t1" = standin-1 ] && [ "$t2" = standin-2 ] || die "mtty's types on $EDU_A: $(ls $types | tr '\n' ' ')"
    [ "$(cat $types/$t2/available_instances)" = 12 ] ||
        die "$t2 offers $(cat $types/$t2/available_instances) instances, expected 12"
    cat > $cfg <<EOF
version: v1
vgpu-configs:
  dual:
    - device-filter: "0x11e81234"
      devices: all
      vgpu-devices:
        $t2: 2
  single:
    - devices: [0]
      vgpu-devices:
        $t1: 3
  too-many:
    - devices: all
      vgpu-devices:
        $t2: 13
  ambiguous:
    - devices: all
      vgpu-devices:
        serial: 1
EOF
    # 1. More than the parent can hold is refused before anything changes.
    hp_expect 2 prepare --mode vm-vgpu $ids --vgpu-config $cfg --vgpu-config-name too-many
    grep -q "$t2 x 13: at most 12" $T/hp.out || die "the refusal does not name the type and the maximum"
    note "$(head -n1 $T/hp.out)"
    grep -q "$EDU_A" $T/hp.out || die "the refusal does not name the GPU"
    hp_expect 2 prepare --mode vm-vgpu $ids --vgpu-config $cfg --vgpu-config-name ambiguous
    grep -q "serial is ambiguous" $T/hp.out || die "'serial' (both types' last token) was not refused as ambiguous"
    [ -z "$(vgpus)" ] || die "refused, yet mdevs exist: $(vgpus)"
    expect_no_journal
    # 2. Two dual-port devices on A; the same UUIDs on every run.
    hp_expect 0 prepare --mode vm-vgpu $ids --vgpu-config $cfg --vgpu-config-name dual
    vgpus > $T/uuids1
    [ $(wc -l < $T/uuids1) = 2 ] || die "expected 2 mdevs, found: $(tr '\n' ' ' < $T/uuids1)"
    for u in $(cat $T/uuids1); do
        [ "$(basename $(readlink $dev/$u/mdev_type))" = $t2 ] || die "$u is not a $t2"
        [ -e $P/$EDU_A/$u ] || die "$u is not a child of $EDU_A"
    done
    [ "$(cat $types/$t2/available_instances)" = 10 ] || die "available_instances did not count down"
    hp_expect 0 --output json status $ids
    grep -q '"actualMode": "vm-vgpu"' $T/hp.out || die "status: actualMode is not vm-vgpu"
    grep -q '"nvidia.com/Dual_port_serial": 2' $T/hp.out || die "status does not advertise the two devices"
    note "status advertises $(grep -o '"nvidia.com/Dual_port_serial": 2' $T/hp.out)"
    hp_expect 0 prepare --mode vm-vgpu $ids --vgpu-config $cfg --vgpu-config-name dual
    vgpus | cmp -s - $T/uuids1 || die "a second run changed the devices: $(vgpus | tr '\n' ' ')"
    # Gone (as after a reboot) and made again: the same UUIDs, so a VM keeps its device.
    for u in $(cat $T/uuids1); do sysfs-write $dev/$u/remove 1 > /dev/null; done
    [ -z "$(vgpus)" ] || die "mdevs left after remove"
    hp_expect 0 prepare --mode vm-vgpu $ids --vgpu-config $cfg --vgpu-config-name dual
    vgpus | cmp -s - $T/uuids1 || die "re-created with other UUIDs: $(vgpus | tr '\n' ' ')"
    # 3. A VM holds one device's /dev/vfio/<group>: leaving vm-vgpu is refused, nothing changes.
    u=$(head -n1 $T/uuids1)
    g=$(basename $(readlink $dev/$u/iommu_group))
    [ -c /dev/vfio/$g ] || die "/dev/vfio/$g missing for mdev $u"
    hold_start /dev/vfio/$g
    hp_expect 3 prepare --mode container $ids
    grep -q "/dev/vfio/$g" $T/hp.out || die "the refusal does not name /dev/vfio/$g"
    note "$(grep -m1 "/dev/vfio/$g" $T/hp.out)"
    vgpus | cmp -s - $T/uuids1 || die "refused, yet the devices changed: $(vgpus | tr '\n' ' ')"
    hold_stop
    # 4. Another config: the dual-port devices go, three single-port ones come.
    hp_expect 0 prepare --mode vm-vgpu $ids --vgpu-config $cfg --vgpu-config-name single
    [ $(vgpus | wc -l) = 3 ] || die "expected 3 mdevs, found: $(vgpus | tr '\n' ' ')"
    for u in $(vgpus); do
        [ "$(basename $(readlink $dev/$u/mdev_type))" = $t1 ] || die "$u is not a $t1"
    done
    # 5. Leaving vm-vgpu removes them; the GPU stays on its host driver.
    hp_expect 0 prepare --mode container $ids
    [ -z "$(vgpus)" ] || die "mdevs left after container mode: $(vgpus | tr '\n' ' ')"
    [ "$(cat $types/$t2/available_instances)" = 12 ] || die "available_instances not restored"
    expect_drv $EDU_A standin
    expect_no_journal
    rmmod mtty
    expect_boot_state
}

hp_t_crash_sweep() {
    # HOSTPREP_TEST_CRASH_AFTER_STEP=k SIGKILLs prepare right after step k; the next run must
    # resolve the journal (roll back) and leave the host consistent.
    local k n devs=$EDU_C
    hp_expect 0 --output json prepare --mode vm-passthrough --dry-run $HP_IDS --devices $devs
    n=$(grep -c '"kind"' $T/hp.out)
    [ "$n" -gt 2 ] || die "cannot count the plan's steps"
    k=0
    while [ $k -lt $n ]; do
        HOSTPREP_TEST_CRASH_AFTER_STEP=$k hp prepare --mode vm-passthrough $HP_IDS --devices $devs
        [ "$HP_RC" = 137 ] || die "step $k: exit $HP_RC, expected death by SIGKILL (137)"
        if [ $k -lt $((n - 1)) ]; then
            journal_exists || die "step $k: no journal after the crash"
        fi
        # The next run: container mode. It rolls the journal back first, then has nothing to do.
        hp_expect 0 prepare --mode container $HP_IDS --devices $devs
        expect_no_journal
        wait_drv $HDA_C snd_hda_intel 30 || true
        expect_boot_state "after crash at step $k and the next run"
        k=$((k + 1))
    done
    # And once with the next run in the same mode: roll back, then do the whole switch.
    HOSTPREP_TEST_CRASH_AFTER_STEP=3 hp prepare --mode vm-passthrough $HP_IDS --devices $devs
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $devs
    expect_drv $EDU_C vfio-pci; expect_drv $HDA_C vfio-pci
    expect_no_journal
    back_to_container $devs
    wait_drv $HDA_C snd_hda_intel 30 || true
    expect_boot_state
    note "$n crash points"
}

hp_t_sigkill_slow_remove() {
    local pid i t0
    echo 3000 > /sys/module/standin/parameters/remove_delay_ms
    trap 'echo 0 > /sys/module/standin/parameters/remove_delay_ms' EXIT
    d0=$(dmesg | wc -l)
    hostprep prepare --mode vm-passthrough $HP_IDS --devices $EDU_B > $T/hp.out 2>&1 &
    pid=$!
    i=0
    while ! dmesg | tail -n +$((d0 + 1)) | grep -q "remove delayed"; do
        i=$((i + 1)); [ $i -lt 100 ] || die "standin remove never started"
        usleep 100000
    done
    kill -9 $pid
    wait $pid || true
    journal_exists || die "no journal after SIGKILL during the unbind"
    note "killed hostprep inside the slow remove(); driver link now '$(drv $EDU_B)'"
    t0=$(now_ms)
    hp_expect 0 prepare --mode container $HP_IDS --devices $EDU_B
    note "the next run resolved the journal in $(( $(now_ms) - t0 )) ms"
    echo 0 > /sys/module/standin/parameters/remove_delay_ms
    expect_drv $EDU_B standin
    expect_no_journal
    expect_boot_state
}

hp_t_force_holder() {
    # --force ignores the holder; the unbind then hangs like nvidia's does. hostprep must give up
    # after --unbind-timeout and return (exit 1) while the holder is still there; once the holder
    # goes, the next run resolves whatever is left.
    local n why=
    n=$(standin_node $EDU_B)
    hold_start $n
    hp_bg 200 prepare --mode vm-passthrough $HP_IDS --devices $EDU_B --force --unbind-timeout 2
    if [ -z "$HP_RC" ]; then
        why="hostprep did not return within 20 s of --unbind-timeout 2 while the holder stays"
        for p in $(pidof hostprep); do
            note "pid $p $(grep State /proc/$p/status | tr -s '\t ' ' ') in $(cat /proc/$p/wchan)"
        done
    else
        [ "$HP_RC" = 1 ] || why="exit $HP_RC, expected 1"
        note "with the holder: exit $HP_RC after $HP_MS ms; journal $(journal_exists && echo left || echo removed)"
    fi
    hold_stop
    if [ -z "$HP_RC" ]; then
        wait $HP_PID || true
        note "after the holder closed, hostprep ended: exit $(cat $T/hp.rc 2>/dev/null): $(tail -n 1 $T/hp.out)"
    fi
    usleep 500000
    note "then: $EDU_B driver '$(drv $EDU_B)' override '$(ovr $EDU_B)', journal $(journal_exists && echo left || echo none)"
    hp_expect 0 prepare --mode container $HP_IDS --devices $EDU_B
    wait_drv $EDU_B standin 30 || die "$EDU_B on '$(drv $EDU_B)' after the recovery run"
    expect_no_journal
    expect_boot_state
    [ -z "$why" ] || die "$why"
}

# After `hp_bg 200 prepare ... --unbind-timeout 2` while a write cannot finish (WHILE): sets why=
# unless hostprep returned, failed, named MESSAGE and journalled the write (KEY true).
left_pending() { # WHILE MESSAGE KEY
    if [ -z "$HP_RC" ]; then
        why="prepare did not return within 20 s of --unbind-timeout 2 while $1"
    elif [ "$HP_RC" = 0 ]; then
        why="prepare succeeded while $1"
    else
        grep -q "$2" $T/hp.out || why="the failure does not say '$2'"
        grep -q "\"$3\": true" /run/hostprep/journal.json 2>/dev/null || why="no $3 in the journal"
    fi
}

hp_t_probe_stalled() {
    # On the way back to the host driver, standin's probe() of B does not return (stall_probe, as
    # nvidia's probe of a GPU that does not come up): the drivers_probe write waits with B's
    # device lock taken. hostprep must return after --unbind-timeout with the probe journalled as
    # pending; while it runs, the next prepare must fail within seconds (on 6.1 naming the
    # running probe; 6.12's uevent does not wait for the lock, and its timed unbind gives up
    # instead) and status must answer; once the probe returns, the next run resolves it.
    local sp=/sys/module/standin/parameters/stall_probe why=
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $EDU_B
    echo $EDU_B > $sp
    hp_bg 200 prepare --mode container $HP_IDS --devices $EDU_B --unbind-timeout 2
    left_pending "the probe stalls" "probe() of it has not returned" pending_probe
    if [ -z "$why" ]; then
        hp_bg 100 prepare --mode container $HP_IDS --devices $EDU_B --unbind-timeout 2
        if [ -z "$HP_RC" ]; then why="the next prepare hung while the probe runs"
        elif [ "$HP_RC" = 0 ]; then why="the next prepare succeeded while the probe runs"
        elif [ "$(uname -r | cut -d. -f1,2)" = 6.1 ]; then
            grep -q "probe() of it is still running" $T/hp.out || why="the next prepare does not name the running probe"
        fi
        note "the next prepare, exit ${HP_RC:-none} after $HP_MS ms: $(tail -n 1 $T/hp.out | cut -c 1-240)"
    fi
    if [ -z "$why" ]; then
        hp_bg 100 --output json status $HP_IDS --devices $EDU_B
        [ -n "$HP_RC" ] || why="status hung while the probe runs"
    fi
    echo > $sp
    for p in $(pidof hostprep); do wait $p 2>/dev/null || true; done
    note "with the probe stalled: ${why:-prepare returned, the next prepare failed at once, status answered}"
    usleep 500000
    hp_expect 0 prepare --mode container $HP_IDS --devices $EDU_B
    grep -q "rolled back an interrupted run" $T/hp.out || die "the next run did not resolve the journal"
    wait_drv $EDU_B standin 30 || die "$EDU_B on '$(drv $EDU_B)' after the recovery run"
    expect_no_journal
    expect_boot_state
    [ -z "$why" ] || die "$why"
}

hp_t_vf_held_numvfs_pending() {
    # A VM holds a VF on vfio-pci (its device open) and --force takes the PF past the refusal: the
    # sriov_numvfs write that disables the VF waits in vfio-pci's remove() with the PF's device
    # lock taken, and a plain read of sriov_numvfs (or, on 6.1, the PF's driver_override) would
    # wait with it. hostprep must return after --unbind-timeout, journal the write as pending, and
    # neither the next prepare nor status may hang while the VF stays held; once the holder goes,
    # the next run puts the VF count back.
    local vf ids="--gpu-ids 1b36:0010 --host-driver nvme" why=
    modprobe vfio_iommu_type1
    nvme_vf_on_vfio
    hold_run vfio-group-status --hold $vf $(grp $vf)
    hp_bg 200 prepare --mode vm-passthrough $ids --devices $NVME --force --unbind-timeout 2
    left_pending "the VF is held" "sriov_numvfs write is still pending" pending_write
    if [ -z "$why" ]; then
        hp_bg 100 prepare --mode container $ids --devices $NVME --unbind-timeout 2
        if [ -z "$HP_RC" ]; then why="the next prepare hung while the write is pending"
        elif [ "$HP_RC" = 0 ]; then why="the next prepare succeeded while the write is pending"
        else grep -q "sriov_numvfs write is still pending" $T/hp.out || why="the next prepare does not name the pending write"
        fi
    fi
    if [ -z "$why" ]; then
        hp_bg 100 --output json status --mode container $ids --devices $NVME
        if [ -z "$HP_RC" ]; then why="status hung while the write is pending"
        else tr -d ' \n' < $T/hp.out | grep -q '"unbindPending":true' || why="status does not show the PF as locked"
        fi
    fi
    hold_stop
    for p in $(pidof hostprep); do wait $p 2>/dev/null || true; done
    wait_numvfs 0 || why="${why:-sriov_numvfs is $(cat $P/$NVME/sriov_numvfs) after the holder closed}"
    note "with the VF held: ${why:-prepare returned, the next prepare refused, status answered}"
    # The next run rolls the journal back: sriov_numvfs 1 again, and the VF, created anew, back on
    # vfio-pci with its override (that run selects another device, so nothing moves after).
    hp_expect 0 prepare --mode container $HP_IDS --devices $EDU_A
    grep -q "rolled back an interrupted run" $T/hp.out || die "the next run did not resolve the journal"
    expect_drv $NVME nvme
    expect_drv $vf vfio-pci "the VF after the rollback"
    [ "$(ovr $vf)" = vfio-pci ] || die "the VF's driver_override is '$(ovr $vf)' after the rollback"
    expect_no_journal
    echo 0 > $P/$NVME/sriov_numvfs
    echo 1 > $P/$NVME/sriov_drivers_autoprobe
    expect_boot_state
    [ -z "$why" ] || die "$why"
}
hp_t_vf_back_after_crash() {
    # A run that disabled a PF's VFs dies right after the sriov_numvfs write. The next run's
    # rollback enables them again, and the kernel creates the VF anew: without its override and,
    # with sriov_drivers_autoprobe 0, on no driver. The rollback must put the VF back on vfio-pci
    # with its override, as it was. (The next run selects another device, so nothing moves after.)
    local vf ids="--gpu-ids 1b36:0010 --host-driver nvme" k
    nvme_vf_on_vfio
    hp_expect 0 --output json prepare --mode vm-passthrough --dry-run $ids --devices $NVME
    k=$(grep -o '"kind": *"[a-z-]*"' $T/hp.out | grep -n set-numvfs | head -1 | cut -d: -f1)
    [ -n "$k" ] || die "the plan has no sriov_numvfs step: $(cat $T/hp.out)"
    # --force: a VF on vfio-pci counts as a VM's (none holds it here).
    HOSTPREP_TEST_CRASH_AFTER_STEP=$((k - 1)) hp prepare --mode vm-passthrough $ids --devices $NVME --force
    [ "$HP_RC" = 137 ] || die "exit $HP_RC, expected death by SIGKILL (137)"
    [ "$(cat $P/$NVME/sriov_numvfs)" = 0 ] || die "the crashed run did not disable the VF"
    hp_expect 0 prepare --mode container $HP_IDS --devices $EDU_A
    grep -q "rolled back an interrupted run" $T/hp.out || die "the next run did not resolve the journal"
    expect_no_journal
    [ "$(cat $P/$NVME/sriov_numvfs)" = 1 ] || die "sriov_numvfs not put back to 1"
    expect_drv $vf vfio-pci "the VF after the rollback"
    [ "$(ovr $vf)" = vfio-pci ] || die "the VF's driver_override is '$(ovr $vf)' after the rollback, not vfio-pci"
    expect_drv $NVME nvme
    echo 0 > $P/$NVME/sriov_numvfs
    echo 1 > $P/$NVME/sriov_drivers_autoprobe
    expect_boot_state
}
wait_numvfs() { # N: sriov_numvfs of the nvme PF reads N within 10 s
    local i=0
    while [ "$(cat $P/$NVME/sriov_numvfs)" != "$1" ]; do
        i=$((i + 1)); [ $i -lt 100 ] || return 1
        usleep 100000
    done
}

# A split from the config's devices rules (agent --once, no --mode): the default container, one
# GPU by bdf and one by index (position in BDF order among the selected GPUs) vm-passthrough.
mixed_config() { # BDF INDEX
    cat > $T/mixed.yaml <<EOF_CONFIG
mode: container
selection:
  gpu-ids: ["1234:11e8"]
  devices: ["$EDU_A", "$EDU_B", "$EDU_C", "$EDU_E"]
host-driver: standin
holder-nodes: /dev/standin*
status:
  path: $T/mixed-status.json
  nfd-features: $T/mixed-nfd
devices:
  - match: {bdf: "$1"}
    mode: vm-passthrough
  - match: {index: $2}
    mode: vm-passthrough
EOF_CONFIG
    chmod 0644 $T/mixed.yaml
}
# The status file of a converged 2 + 2 split: desired and actual mode mixed, the split, and the
# resource sets advertised. The stand-ins are not NVIDIA functions (vendor 1234), and the sandbox
# device plugin counts only vendor 10de on vfio-pci (NVIDIA/kubevirt-gpu-device-plugin,
# pkg/device_plugin), so the two vfio groups advertise nothing here; the two GPUs left on the host
# driver are nvidia.com/gpu: 2. The passthrough count on NVIDIA functions is unit-tested.
expect_split_status() {
    local s adv
    s=$(tr -d ' \n' < $T/mixed-status.json)
    for want in '"desiredMode":"mixed"' '"actualMode":"mixed"' '"converged":true' \
            '"desiredSplit":{"container":2,"vm-passthrough":2}'; do
        case $s in *"$want"*) ;; *) die "status: no $want in $(echo "$s" | head -c 400)" ;; esac
    done
    adv=$(echo "$s" | grep -o '"advertised":{[^}]*}')
    [ "$adv" = '"advertised":{"nvidia.com/gpu":2}' ] || die "status: $adv is not nvidia.com/gpu: 2 alone"
    grep -qx 'hostprep.desired-mode=mixed' $T/mixed-nfd && grep -qx 'hostprep.gpus.container=2' $T/mixed-nfd \
        && grep -qx 'hostprep.gpus.vm-passthrough=2' $T/mixed-nfd \
        || die "NFD features: $(tr '\n' ' ' < $T/mixed-nfd)"
}
hp_t_mixed_split() {
    modprobe vfio_iommu_type1
    mixed_config $EDU_A 2                       # index 2 in BDF order (A B C E): C
    hp_expect 0 agent --once --config $T/mixed.yaml
    expect_vfio_group $EDU_A; expect_vfio_group $EDU_C; expect_drv $HDA_C vfio-pci "C's audio"
    expect_drv $EDU_B standin; expect_drv $EDU_E standin; expect_drv $OHCI_E "" "E's USB"
    expect_drv $EDU_D standin "unselected D"
    expect_split_status
    note "$(tr -d ' \n' < $T/mixed-status.json | grep -o '"advertised":{[^}]*}'), first run $HP_MS ms"
    # Reversed in one run: A and C back to standin (and C's audio to snd_hda_intel) while B and E
    # (with E's USB companion) go to vfio-pci.
    mixed_config $EDU_B 3                       # index 3: E
    hp_expect 0 agent --once --config $T/mixed.yaml
    expect_drv $EDU_A standin; expect_drv $EDU_C standin
    wait_drv $HDA_C snd_hda_intel 30 || die "$HDA_C not back on snd_hda_intel: '$(drv $HDA_C)'"
    expect_vfio_group $EDU_B; expect_vfio_group $EDU_E; expect_drv $OHCI_E vfio-pci "E's USB"
    expect_drv $EDU_D standin "unselected D"
    expect_split_status
    expect_no_journal
    note "reversed in one run: $HP_MS ms"
    pci_state > $T/s1
    hp_expect 0 agent --once --config $T/mixed.yaml
    ! grep -q 'step=move' $T/hp.out || die "a third run moved devices: $(grep 'step=move' $T/hp.out | tr '\n' ' ')"
    state_diff $T/s1 > $T/sd.out || die "a third run changed: $(tr '\n' ';' < $T/sd.out)"
    hp_expect 0 prepare --mode container $HP_IDS --devices $EDU_B,$EDU_E
    expect_boot_state
}

# --- booted with intel_iommu=off (guest/noiommu.sh) --------------------------------------------
hp_t_noiommu_preflight() {
    [ -z "$(ls /sys/kernel/iommu_groups)" ] || die "IOMMU groups exist although intel_iommu=off"
    hp preflight --mode vm-passthrough $HP_IDS --devices $EDU_A --color never
    [ "$HP_RC" = 1 ] || die "exit $HP_RC, expected 1"
    grep -qE "^FAIL +IOMMU enabled by the kernel" $T/hp.out || die "'IOMMU enabled by the kernel' did not FAIL"
    grep -qE "^PASS +IOMMU in firmware" $T/hp.out || die "the DMAR table is there: 'IOMMU in firmware' should PASS"
    grep -qE "^FAIL +IOMMU kernel argument.*intel_iommu=off" $T/hp.out || die "'IOMMU kernel argument' did not FAIL naming intel_iommu=off"
    note "$(grep -E '^[A-Z]+ +IOMMU kernel argument' $T/hp.out)"
    note "$(grep -E '^[A-Z]+ +IOMMU enabled by the kernel' $T/hp.out)"
}

hp_t_noiommu_prepare() {
    # vfio-pci cannot take a device without an IOMMU group: prepare must fail and roll back.
    hp prepare --mode vm-passthrough $HP_IDS --devices $EDU_A
    [ "$HP_RC" = 1 ] || [ "$HP_RC" = 3 ] || die "exit $HP_RC, expected 1 (failed, rolled back) or 3 (refused)"
    note "exit $HP_RC: $(tail -n 1 $T/hp.out)"
    expect_boot_state "after prepare without an IOMMU"
    expect_no_journal
}
