# The GPU Operator's driver container on a real kernel (busybox sh; sourced by run_test with lib.sh
# and cases.sh).
#
# With host-driver-provider operator the host's module tree has no nvidia: the operator's driver
# container loads nvidia.ko from its own root (NVIDIA/gpu-operator assets/state-driver), which it
# shares with the host at /run/nvidia/driver. Here standin.ko is moved out of lib/modules to
# $OP_CTR, the "driver container", kmod's indexes are swapped for ones made without it
# (build-initramfs.sh: /usr/share/hostprep-vm/no-standin/), standin is unloaded, and an `insmod`
# from $OP_CTR by another process plays the container's start.
OP_CTR=/run/driver-ctr
OP_DEVS="$EDU_A,$EDU_B"
OP_KMOD=/lib/modules/$(uname -r)
OP_WAITING="waiting for the host driver from the GPU Operator's driver container"
AGENT=

standin_loaded() { grep -q '^standin ' /proc/modules; }

# standin out of the module tree and unloaded. $T/undo.sh puts the tree back and loads standin:
# the EXIT trap runs it (op_undo), and restore_boot_state after a test its timeout killed.
op_hide_module() {
    local i=0
    mkdir -p $OP_CTR $T/modtree.orig
    cp $OP_KMOD/modules.* $T/modtree.orig/
    cat > $T/undo.sh <<EOF
if [ -e $OP_CTR/standin.ko ] && [ ! -e $OP_KMOD/extra/standin.ko ]; then mv $OP_CTR/standin.ko $OP_KMOD/extra/standin.ko; fi
cp $T/modtree.orig/modules.* $OP_KMOD/
rm -rf /run/nvidia
grep -q '^standin ' /proc/modules || modprobe standin
rm -f $T/undo.sh
EOF
    trap op_undo EXIT
    mv $OP_KMOD/extra/standin.ko $OP_CTR/standin.ko
    cp /usr/share/hostprep-vm/no-standin/modules.* $OP_KMOD/
    ! grep -q standin $OP_KMOD/modules.dep || die "modules.dep still lists standin"
    rmmod standin || die "rmmod standin failed"
    while [ -e /sys/module/standin ] && [ $i -lt 50 ]; do usleep 100000; i=$((i + 1)); done
    ! standin_loaded || die "standin still loaded after rmmod"
    ! modprobe standin 2>/dev/null || die "modprobe standin loaded it from the hidden tree"
    ! standin_loaded || die "standin loaded from the hidden tree"
}
op_undo() {
    if [ -n "$AGENT" ]; then kill $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; AGENT=; fi
    if [ -e $T/undo.sh ]; then sh $T/undo.sh || true; fi
}

# "Status/Reason" of a condition in a status document (FILE TYPE), "" when it has none.
op_cond() {
    tr -d ' \n' < $1 | grep -o "{\"type\":\"$2\",\"status\":\"[A-Za-z]*\",\"reason\":\"[A-Za-z]*\"" \
        | sed 's/.*"status":"\([A-Za-z]*\)","reason":"\([A-Za-z]*\)"/\1\/\2/'
}
op_field() { tr -d ' \n' < $1 | grep -o "\"$2\":[a-z\"-]*" | head -n 1 | cut -d: -f2 | tr -d '"'; }

# A and B waiting: no driver, no override, standin not loaded.
op_expect_waiting() { # what
    local d
    for d in $EDU_A $EDU_B; do
        [ -z "$(drv $d)" ] || die "$1: $d on '$(drv $d)', expected no driver"
        [ -z "$(ovr $d)" ] || die "$1: $d has override '$(ovr $d)'"
    done
    ! standin_loaded || die "$1: standin got loaded"
}
# A status document (FILE) of A and B waiting in container mode.
op_expect_status_waiting() { # FILE what
    [ "$(op_cond $1 HostDriverProvided)" = False/WaitingForOperatorDriver ] \
        || die "$2: HostDriverProvided is '$(op_cond $1 HostDriverProvided)', expected False/WaitingForOperatorDriver"
    [ "$(op_cond $1 DevicesOnWantedDriver)" = Unknown/WaitingForHostDriver ] \
        || die "$2: DevicesOnWantedDriver is '$(op_cond $1 DevicesOnWantedDriver)', expected Unknown/WaitingForHostDriver"
    [ "$(op_field $1 desiredMode)" = container ] || die "$2: desiredMode '$(op_field $1 desiredMode)'"
    [ "$(op_field $1 converged)" = false ] || die "$2: converged while waiting"
    ! tr -d ' \n' < $1 | grep -q '"onWantedDriver":false' || die "$2: a waiting GPU is reported as drift"
}
# A status document (FILE) of A and B on standin, container mode, converged.
op_expect_status_converged() { # FILE what
    [ "$(op_cond $1 HostDriverProvided)" = True/OperatorDriverLoaded ] \
        || die "$2: HostDriverProvided is '$(op_cond $1 HostDriverProvided)', expected True/OperatorDriverLoaded"
    [ "$(op_cond $1 DevicesOnWantedDriver)" = True/AllOnWantedDriver ] \
        || die "$2: DevicesOnWantedDriver is '$(op_cond $1 DevicesOnWantedDriver)'"
    [ "$(op_field $1 desiredMode)" = container ] && [ "$(op_field $1 actualMode)" = container ] \
        || die "$2: desiredMode '$(op_field $1 desiredMode)', actualMode '$(op_field $1 actualMode)'"
    [ "$(op_field $1 converged)" = true ] || die "$2: not converged"
}

# prepare --mode container with the module nowhere in the host's tree: provider host fails and
# stays on vfio-pci; provider operator (and auto, with the operator's driver root there) never
# loads it, does not roll back, and leaves the GPUs waiting; the driver container's insmod binds
# them, and the next run has nothing to do.
hp_t_operator_prepare() {
    modprobe vfio_iommu_type1
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $OP_DEVS
    expect_vfio_group $EDU_A; expect_vfio_group $EDU_B
    op_hide_module
    pci_state > $T/op.vm
    # 1. Provider host (the default): nothing can load standin; A and B stay on vfio-pci.
    hp prepare --mode container $HP_IDS --devices $OP_DEVS
    [ "$HP_RC" != 0 ] || die "provider host without standin in lib/modules: exit 0"
    state_diff $T/op.vm > $T/sd.out || die "provider host: not left on vfio-pci: $(tr '\n' ';' < $T/sd.out)"
    expect_no_journal
    ! standin_loaded || die "provider host: standin got loaded"
    grep -q "cannot load module standin" $T/hp.out || die "provider host: no 'cannot load module standin': $(head -n 2 $T/hp.out | tr '\n' ' ')"
    note "provider host: exit $HP_RC, $(grep -o 'cannot load module standin: [^(]*' $T/hp.out | head -n 1)"
    # 2. Provider operator: the plan has no load-module step; the run unbinds vfio-pci, leaves
    #    A and B without driver and override, exits 0 saying it waits.
    hp_expect 0 --output json prepare --mode container --dry-run $HP_IDS --host-driver-provider operator --devices $OP_DEVS
    ! grep -q '"load-module"' $T/hp.out || die "the operator plan loads a module"
    hp_expect 0 prepare --mode container $HP_IDS --host-driver-provider operator --devices $OP_DEVS
    grep "$OP_WAITING" $T/hp.out | grep "$EDU_A" | grep -q "$EDU_B" \
        || die "no '$OP_WAITING ...: $EDU_A, $EDU_B' in: $(tail -n 3 $T/hp.out | tr '\n' ' ')"
    op_expect_waiting "provider operator"
    expect_no_journal
    hp_expect 0 --output json status --mode container $HP_IDS --host-driver-provider operator --devices $OP_DEVS
    op_expect_status_waiting $T/hp.out "status while waiting"
    # 3. Again: still waiting, nothing changes.
    pci_state > $T/op.wait
    hp_expect 0 prepare --mode container $HP_IDS --host-driver-provider operator --devices $OP_DEVS
    grep -q "$OP_WAITING" $T/hp.out || die "the second run does not say it waits"
    state_diff $T/op.wait > $T/sd.out || die "the second run changed: $(tr '\n' ';' < $T/sd.out)"
    # 4. auto is operator only with the operator's marks (/run/nvidia/driver or validations).
    hp_expect 0 --output json status --mode container $HP_IDS --host-driver-provider auto --devices $OP_DEVS
    [ -z "$(op_cond $T/hp.out HostDriverProvided)" ] || die "auto without /run/nvidia: HostDriverProvided '$(op_cond $T/hp.out HostDriverProvided)'"
    tr -d ' \n' < $T/hp.out | grep -q '"onWantedDriver":false' || die "auto without /run/nvidia: the driverless GPUs are not drift"
    mkdir -p /run/nvidia/driver
    hp_expect 0 --output json status --mode container $HP_IDS --host-driver-provider auto --devices $OP_DEVS
    op_expect_status_waiting $T/hp.out "auto with /run/nvidia/driver"
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $OP_DEVS
    expect_vfio_group $EDU_A; expect_vfio_group $EDU_B
    hp_expect 0 prepare --mode container $HP_IDS --host-driver-provider auto --devices $OP_DEVS
    grep -q "$OP_WAITING" $T/hp.out || die "auto with /run/nvidia/driver: the run does not say it waits"
    op_expect_waiting "provider auto"
    # 5. The driver container loads its module: the kernel binds A and B; nothing left to do.
    insmod $OP_CTR/standin.ko || die "insmod $OP_CTR/standin.ko failed"
    wait_drv $EDU_A standin 50 && wait_drv $EDU_B standin 50 \
        || die "after insmod: $EDU_A on '$(drv $EDU_A)', $EDU_B on '$(drv $EDU_B)'"
    hp_expect 0 prepare --mode container $HP_IDS --host-driver-provider operator --devices $OP_DEVS
    grep -q "nothing to do" $T/hp.out || die "after insmod: not 'nothing to do'"
    ! grep -q "$OP_WAITING" $T/hp.out || die "after insmod: still says it waits"
    hp_expect 0 --output json status --mode container $HP_IDS --host-driver-provider operator --devices $OP_DEVS
    op_expect_status_converged $T/hp.out "status after insmod"
    op_undo
    trap - EXIT
    expect_boot_state "after the module tree was restored"
    note "$(uname -r): operator and auto: exit 0 waiting, A and B driverless, standin never loaded; insmod from $OP_CTR: on standin, nothing to do"
}

# The agent (container mode, provider operator, reconcile off) started with A and B on vfio-pci
# and standin nowhere: it unbinds them, reports waiting, and when another process insmods the
# driver container's standin.ko, finishes the convergence and publishes it, not restarted.
hp_t_operator_agent() {
    local i pid
    modprobe vfio_iommu_type1
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $OP_DEVS
    expect_vfio_group $EDU_A; expect_vfio_group $EDU_B
    op_hide_module
    cat > $T/op.yaml <<EOF_CONFIG
mode: container
selection:
  gpu-ids: ["1234:11e8"]
  devices: ["$EDU_A", "$EDU_B"]
host-driver: standin
host-driver-provider: operator
holder-nodes: /dev/standin*
status:
  path: $T/op-status.json
EOF_CONFIG
    chmod 0644 $T/op.yaml
    rm -f $T/op-status.json
    echo "\$ hostprep agent --config $T/op.yaml &"
    hostprep agent --config $T/op.yaml > $T/agent.log 2>&1 &
    AGENT=$!
    echo $AGENT >> $T/holders
    # 1. Waiting, within 60 s: the log says so, the status file has the condition.
    i=0
    until grep -q "$OP_WAITING" $T/agent.log && [ "$(op_cond $T/op-status.json HostDriverProvided 2>/dev/null)" = False/WaitingForOperatorDriver ]; do
        kill -0 $AGENT 2>/dev/null || die "the agent exited: $(tail -n 5 $T/agent.log | tr '\n' ' ')"
        i=$((i + 1)); [ $i -lt 600 ] || die "no waiting status within 60 s: $(tail -n 5 $T/agent.log | tr '\n' ' ')"
        usleep 100000
    done
    sed 's/^/    /' $T/agent.log
    op_expect_waiting "agent"
    op_expect_status_waiting $T/op-status.json "the agent's status while waiting"
    expect_no_journal
    # 2. Another process loads the driver container's module.
    echo "\$ insmod $OP_CTR/standin.ko"
    insmod $OP_CTR/standin.ko || die "insmod $OP_CTR/standin.ko failed"
    i=0
    until [ "$(op_field $T/op-status.json converged)" = true ]; do
        kill -0 $AGENT 2>/dev/null || die "the agent exited: $(tail -n 5 $T/agent.log | tr '\n' ' ')"
        i=$((i + 1)); [ $i -lt 600 ] || die "status not converged within 60 s of insmod: HostDriverProvided '$(op_cond $T/op-status.json HostDriverProvided)', A '$(drv $EDU_A)', B '$(drv $EDU_B)'; $(tail -n 3 $T/agent.log | tr '\n' ' ')"
        usleep 100000
    done
    OP_AFTER="$((i / 10)).$((i % 10)) s"
    echo "    (converged $OP_AFTER after insmod)"
    sed 's/^/    /' $T/agent.log | tail -n 4
    expect_drv $EDU_A standin; expect_drv $EDU_B standin
    [ -z "$(ovr $EDU_A)" ] && [ -z "$(ovr $EDU_B)" ] || die "override left: '$(ovr $EDU_A)' '$(ovr $EDU_B)'"
    op_expect_status_converged $T/op-status.json "the agent's status after insmod"
    grep -q "host driver module standin appeared" $T/agent.log || die "the agent did not hear the module appear"
    kill -0 $AGENT 2>/dev/null || die "the agent is gone"    # not restarted: started once, still running
    # 3. SIGTERM: exit 0, nothing unbound.
    pid=$AGENT
    kill -TERM $AGENT; i=0; wait $AGENT || i=$?; AGENT=
    [ $i = 0 ] || die "the agent (pid $pid) exited $i on SIGTERM"
    expect_drv $EDU_A standin; expect_drv $EDU_B standin
    op_undo
    trap - EXIT
    expect_boot_state "after the module tree was restored"
    note "$(uname -r): agent pid $pid waited with A and B driverless, its status converged $OP_AFTER after insmod from $OP_CTR, no restart"
}
