# Resets on the way back from a VM (issue 43), on the real kernel (busybox sh; sourced by a
# test's subshell after lib.sh and cases.sh). tests/vm/README.md, "Resets", has the facts.
#
# How a test sees that a reset happened: a stand-in GPU is unbound when the kernel resets it, so
# standin.ko gets no reset_prepare/reset_done; instead the test writes a scratch value into a
# register of the edu device's config space that a reset clears and nothing else touches: the
# MSI capability's message address (MSI is off, standin never enables it). QEMU clears it on any
# reset of the device (hw/pci/pci.c pci_do_device_reset -> msi_reset), the kernel's
# pci_restore_state restores MSI only where it was enabled, and unbinding or probing standin or
# vfio-pci leaves it alone (checked by every test below before the run that resets).
RP1=0000:00:06.0    # root port above bus 01: C and its audio function
RP2=0000:00:07.0    # root port above bus 02: D and the e1000e NIC_D
MARK=0xfee0beec     # a valid MSI address (bits 31:20 0xfee, bits 1:0 zero)

mark() { pci-config $P/$1 cap5+4 $MARK; [ "$(marker $1)" = $MARK ] || die "$1: cannot write the marker"; }
marker() { pci-config $P/$1 cap5+4; }
expect_marked() { # BDF WHEN
    [ "$(marker $1)" = $MARK ] || die "$1: marker $(marker $1) $2, expected $MARK (something reset it)"
}
expect_reset() { # BDF WHEN
    [ "$(marker $1)" = 0x00000000 ] || die "$1: marker $(marker $1) $2: no reset happened"
}
# The dry run's steps from `--output json` (keys sorted: arg, bdf, description, group, kind):
# one line "KIND BDF ARG" per step.
json_steps() { # FILE
    awk -F'"' '/^ *\{/ { a = ""; b = "" }
        /^ *"arg": / { a = $4 } /^ *"bdf": / { b = $4 }
        /^ *"kind": / { print $4, b, a; a = ""; b = "" }' $1
}
# Does this hostprep know --no-reset yet (the lead's branch adds it)?
has_no_reset() { hostprep prepare --help 2>&1 | grep -q -- --no-reset; }

# The facts hostprep's resets build on, per kernel (the README's table).
t_reset_facts() {
    local k b r
    case $(uname -r) in 6.1.*) k=6.1 ;; 6.12.*) k=6.12 ;; 7.3.*) k=7.3 ;; *) k=other ;; esac
    # Root-bus edus (A, B) and the NVSwitch stand-in: no method at all, so no `reset` file.
    for b in $EDU_A $EDU_B $NVSW $HDA_C $OHCI_E; do
        [ ! -e $P/$b/reset ] || die "$b has a reset file (methods '$(cat $P/$b/reset_method)')"
    done
    # Function 0 of each multi-function slot behind a bridge (C, D, E) lists "bus": the kernel
    # probed its methods before function 1 was on the bus.
    for b in $EDU_C $EDU_D $EDU_E; do
        r=$(cat $P/$b/reset_method 2>/dev/null || echo none)
        [ "$r" = bus ] || die "$b: reset_method '$r', expected 'bus'"
    done
    [ "$(cat $P/$NVME/reset_method)" = "flr bus" ] || die "nvme: reset_method '$(cat $P/$NVME/reset_method)'"
    [ "$(cat $P/$E1000E/reset_method)" = pm ] || die "e1000e: reset_method '$(cat $P/$E1000E/reset_method)'"
    # Bridges: reset_subordinate (Linux 6.13, 6.12.5, 6.1.120) on every root port and the
    # pcie-pci-bridge.
    for b in $RP1 $RP2 0000:00:08.0 $PBRIDGE; do
        [ -e $P/$b/reset_subordinate ] || die "$k: no reset_subordinate on $b"
    done
    # C's "bus" does not work while its audio function is on the bus: ENOTTY. The bus reset
    # does, and clears the marker; probing standin again does not bring it back.
    echo $EDU_C > /sys/bus/pci/drivers/standin/unbind
    echo $HDA_C > /sys/bus/pci/drivers/snd_hda_intel/unbind
    mark $EDU_C
    r=$(sysfs-write $P/$EDU_C/reset 1 || true)
    [ "$r" = ENOTTY ] || die "$EDU_C reset beside its audio function: $r, expected ENOTTY"
    expect_marked $EDU_C "after a reset that failed"
    r=$(sysfs-write $P/$RP1/reset_subordinate 1 || true)
    [ "$r" = OK ] || die "$RP1 reset_subordinate: $r"
    expect_reset $EDU_C "after $RP1's reset_subordinate"
    host_bind $EDU_C; host_bind $HDA_C
    wait_drv $HDA_C snd_hda_intel 50 || die "$HDA_C not back on snd_hda_intel"
    expect_drv $EDU_C standin
    # A, marked, through vfio-pci and back by hand (no reset): the marker stays.
    modprobe vfio-pci
    mark $EDU_A
    vfio_bind $EDU_A; expect_drv $EDU_A vfio-pci
    host_bind $EDU_A; expect_drv $EDU_A standin
    expect_marked $EDU_A "after vfio-pci and standin, by hand"
    pci-config $P/$EDU_A cap5+4 0
    note "$k: $(uname -r): reset_method A,B none, C,D,E 'bus' (C's write ENOTTY beside its audio), nvme 'flr bus', e1000e 'pm'; reset_subordinate on $RP1 $RP2 00:08.0 $PBRIDGE"
    expect_boot_state
}

# (a) A function reset through its own `reset`: C alone on its bus (its audio function removed),
# where the kernel's "bus" method works.
hp_t_reset_function() {
    modprobe vfio_iommu_type1
    echo 1 > $P/$HDA_C/remove
    [ ! -e $P/$HDA_C ] || die "$HDA_C not removed"
    trap 'echo 1 > $P/$RP1/rescan' EXIT     # the audio function back, whatever happens
    mark $EDU_C
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $EDU_C
    expect_vfio_group $EDU_C
    expect_marked $EDU_C "on vfio-pci"
    hp_expect 0 --output json prepare --mode container --dry-run $HP_IDS --devices $EDU_C
    json_steps $T/hp.out > $T/steps
    grep -q "^reset $EDU_C" $T/steps || die "the dry run has no reset step for $EDU_C: $(tr '\n' ';' < $T/steps)"
    ! grep -q "^reset-bus" $T/steps || die "the dry run resets a bus: $(grep reset-bus $T/steps)"
    expect_marked $EDU_C "after the dry run"
    if has_no_reset; then
        hp_expect 0 prepare --mode container --no-reset $HP_IDS --devices $EDU_C
        expect_drv $EDU_C standin
        expect_marked $EDU_C "after container with --no-reset"
        hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $EDU_C
    else
        note "this hostprep has no --no-reset: that half not run"
    fi
    hp_expect 0 prepare --mode container $HP_IDS --devices $EDU_C
    expect_drv $EDU_C standin
    [ -n "$(standin_node $EDU_C)" ] || die "no /dev/standin node for $EDU_C"
    expect_reset $EDU_C "after container"
    expect_no_journal
    echo 1 > $P/$RP1/rescan; trap - EXIT
    wait_drv $HDA_C snd_hda_intel 50 || die "$HDA_C not back on snd_hda_intel after the rescan: '$(drv $HDA_C)'"
    [ "$(grp $HDA_C)" = "$(grp $EDU_C)" ] || die "$HDA_C back in group $(grp $HDA_C), not $(grp $EDU_C)"
    expect_boot_state
}

# (b) Buses reset whole through their bridge's reset_subordinate: C with its audio function
# behind rp1, E with its USB function behind the pcie-pci-bridge. Each GPU's "bus" method is
# listed but cannot work beside its companion (t_reset_facts), so no `reset` step for it.
hp_t_reset_bus() {
    local g c bridge
    modprobe vfio_iommu_type1
    for g in $EDU_C $EDU_E; do
        case $g in $EDU_C) c=$HDA_C; bridge=$RP1 ;; *) c=$OHCI_E; bridge=$PBRIDGE ;; esac
        mark $g
        hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $g
        expect_drv $c vfio-pci "companion $c"
        expect_marked $g "on vfio-pci"
        hp_expect 0 --output json prepare --mode container --dry-run $HP_IDS --devices $g
        json_steps $T/hp.out > $T/steps
        grep -q "^reset-bus [^ ]* $bridge\$" $T/steps || die "no reset-bus through $bridge: $(tr '\n' ';' < $T/steps)"
        [ "$(grep -c '^reset-bus' $T/steps)" = 1 ] || die "more than one bus reset: $(tr '\n' ';' < $T/steps)"
        ! grep -q "^reset " $T/steps || die "a function reset beside the bus reset: $(grep '^reset ' $T/steps)"
        if has_no_reset; then
            hp_expect 0 prepare --mode container --no-reset $HP_IDS --devices $g
            expect_marked $g "after container with --no-reset"
            hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $g
        fi
        hp_expect 0 prepare --mode container $HP_IDS --devices $g
        expect_drv $g standin
        expect_reset $g "after container (bus reset through $bridge)"
        expect_no_journal
        note "$g and $c: one reset-bus through $bridge, marker cleared"
    done
    wait_drv $HDA_C snd_hda_intel 30 || die "$HDA_C not back on snd_hda_intel: '$(drv $HDA_C)'"
    expect_boot_state
}

# (c) A bus that also carries a device hostprep does not move is never reset: D on vfio-pci by
# hand (its group-mate, the e1000e NIC_D, stays on e1000e); back to standin without a reset.
hp_t_reset_never_nic_bus() {
    local d0
    modprobe vfio-pci
    mark $EDU_D
    vfio_bind $EDU_D
    expect_drv $EDU_D vfio-pci
    expect_marked $EDU_D "on vfio-pci"
    hp --output json prepare --mode container --dry-run $HP_IDS --devices $EDU_D
    [ "$HP_RC" = 0 ] || { host_bind $EDU_D; die "dry run back from vfio-pci: exit $HP_RC"; }
    json_steps $T/hp.out > $T/steps
    grep -q "^probe $EDU_D" $T/steps || die "no probe of $EDU_D in the plan: $(tr '\n' ';' < $T/steps)"
    ! grep -q "^reset" $T/steps || die "a reset on the NIC's bus: $(grep '^reset' $T/steps)"
    d0=$(kernel_log | grep -c e1000e || true)
    hp_expect 0 prepare --mode container $HP_IDS --devices $EDU_D
    expect_drv $EDU_D standin
    expect_marked $EDU_D "back on standin (its bus carries $NIC_D: no reset)"
    expect_drv $NIC_D e1000e "the NIC on D's bus"
    [ "$(kernel_log | grep -c e1000e || true)" = "$d0" ] || die "the kernel logged about e1000e: $(kernel_log | grep e1000e | tail -n 2)"
    pci-config $P/$EDU_D cap5+4 0
    expect_boot_state
}

# (d) hostprep recover on the real kernel. The functions answer here (QEMU's edu does not fall
# off the bus), so these show the ladder's writes, the refusals and the move to the mode's
# driver; the fake kernel's recover_test has the silent functions.
hp_t_recover() {
    local n
    modprobe vfio-pci
    # 1. --dry-run changes nothing: C left without a driver (as after a failed probe), its audio
    #    function still on snd_hda_intel; C marked.
    echo $EDU_C > /sys/bus/pci/drivers/standin/unbind
    mark $EDU_C
    pci_state > $T/rc.before; d0=$(kernel_log | wc -l)
    hp_expect 0 recover --dry-run --mode container $HP_IDS --devices $EDU_C
    grep -q "reset bus 0000:01 through $RP1" $T/hp.out || die "the dry run's ladder has no bus reset through $RP1"
    ! grep -q "reset $EDU_C" $T/hp.out || die "the ladder resets $EDU_C by its 'bus' method, which fails beside $HDA_C"
    state_diff $T/rc.before > $T/sd.out || die "recover --dry-run changed: $(tr '\n' ';' < $T/sd.out)"
    expect_marked $EDU_C "after recover --dry-run"
    [ "$(kernel_log | wc -l)" = "$d0" ] || die "recover --dry-run made the kernel log: $(kernel_log | tail -n +$((d0 + 1)) | head -3)"
    # 2. recover unbinds the audio function, resets the bus (theirs alone: the marker goes), and
    #    puts C on standin and the audio function back on snd_hda_intel.
    hp_expect 0 --output json recover --mode container $HP_IDS --devices $EDU_C
    expect_drv $EDU_C standin
    wait_drv $HDA_C snd_hda_intel 30 || die "$HDA_C on '$(drv $HDA_C)' after recover"
    expect_reset $EDU_C "after recover"
    grep -q "\"by\": \"a bus reset through $RP1\"" $T/hp.out || die "recover of $EDU_C: not by a bus reset through $RP1"
    note "C: $(sed -n 's/^ *"by": "\(.*\)",*$/\1/p' $T/hp.out)"
    expect_no_journal
    [ ! -e /run/hostprep/rescan ] || die "recover left /run/hostprep/rescan"
    # 3. A driverless on the root bus (no reset method, no bridge): recover brings it back to
    #    standin (exit 0), through a remove and a rescan.
    echo $EDU_A > /sys/bus/pci/drivers/standin/unbind
    hp_expect 0 --output json recover --mode container $HP_IDS --devices $EDU_A
    expect_drv $EDU_A standin
    [ -n "$(standin_node $EDU_A)" ] || die "no /dev/standin node for $EDU_A after recover"
    note "A: $(sed -n 's/^ *"by": "\(.*\)",*$/\1/p' $T/hp.out)"
    # 4. Refused (exit 3): a holder on A's node; nothing changes.
    n=$(standin_node $EDU_A)
    hold_start $n
    pci_state > $T/rc.before
    hp_expect 3 recover --mode container $HP_IDS --devices $EDU_A
    grep -q "pid $HOLD_PID" $T/hp.out || die "the refusal does not name the holder pid $HOLD_PID"
    state_diff $T/rc.before > $T/sd.out || die "a refused recover changed: $(tr '\n' ';' < $T/sd.out)"
    hold_stop
    # 5. Refused (exit 3): D's slot and bus carry the e1000e NIC_D, which is not the GPU's; the
    #    NIC stays bound and answering.
    pci_state > $T/rc.before
    hp_expect 3 recover --mode container $HP_IDS --devices $EDU_D
    grep -q "$NIC_D" $T/hp.out || die "the refusal does not name $NIC_D"
    expect_drv $NIC_D e1000e "the NIC on D's bus"
    state_diff $T/rc.before > $T/sd.out || die "a refused recover changed: $(tr '\n' ';' < $T/sd.out)"
    # 6. Bad input (exit 2): a function that is not a GPU.
    hp_expect 2 recover --mode container $HP_IDS --devices $E1000E
    expect_boot_state
}

# preflight's gpu.reset on the real kernel: C and E reset with their buses (INFO), D beside its
# NIC has no way (WARN naming it). D's group FAILs isolation too, so the verdict is not asserted.
hp_t_reset_preflight() {
    hp preflight --mode vm-passthrough $HP_IDS --devices $EDU_C,$EDU_E --color never
    grep -E "^INFO +Reset on the way back" $T/hp.out > $T/gr || die "gpu.reset is not INFO: $(grep 'Reset on the way back' $T/hp.out)"
    grep -q "$RP1" $T/gr && grep -q "$PBRIDGE" $T/gr || die "gpu.reset does not name the bus resets: $(cat $T/gr)"
    hp preflight --mode vm-passthrough $HP_IDS --devices $EDU_D --color never
    grep -E "^WARN +Reset on the way back" $T/hp.out > $T/gr || die "gpu.reset for $EDU_D is not WARN: $(grep 'Reset on the way back' $T/hp.out)"
    grep -q "$NIC_D" $T/gr || die "gpu.reset for $EDU_D does not name $NIC_D: $(cat $T/gr)"
    note "$(cut -c1-200 $T/gr)"
    expect_boot_state
}
