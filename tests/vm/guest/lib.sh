# Guest test library (busybox sh). Sourced by the suites and by each test's subshell.
# The topology is documented in tests/vm/README.md and built by tests/vm/run-vm.sh.

E1000E=0000:00:02.0     # own group, e1000e
EDU_A=0000:00:03.0      # own group, standin
EDU_B=0000:00:04.0      # own group, standin
TESTDEV=0000:00:05.0    # own group, driverless
EDU_C=0000:01:00.0      # behind rp1, shares a group with HDA_C
HDA_C=0000:01:00.1      # ich9-intel-hda (audio companion), snd_hda_intel
EDU_D=0000:02:00.0      # behind rp2, shares a group with NIC_D
NIC_D=0000:02:00.1      # e1000e: a foreign device in EDU_D's group
NVME=0000:03:00.0       # behind rp3, nvme PF with SR-IOV (4 VFs)
PBRIDGE=0000:00:09.0    # pcie-pci-bridge: its group aliases everything behind it
EDU_E=0000:04:01.0      # behind PBRIDGE, standin
OHCI_E=0000:04:01.1     # behind PBRIDGE, pci-ohci in E's slot (USB companion), driverless
NVSW=0000:00:1b.0       # tpci200 (1498:30c8, class 0680): the NVSwitch, own group, standin-switch
EDUS="$EDU_A $EDU_B $EDU_C $EDU_D $EDU_E"

P=/sys/bus/pci/devices
# One scratch directory per boot, made by the suite's shell and inherited by every test's shell
# (run_test's children source this file again).
if [ -z "${HOSTPREP_T:-}" ]; then
    HOSTPREP_T=$(mktemp -d -t hostprep-tests.XXXXXX)
    export HOSTPREP_T
fi
T=$HOSTPREP_T

die() { echo "$*" > $T/why; echo "die: $*"; exit 1; }
drv() { local l; l=$(readlink $P/$1/driver 2>/dev/null) || true; echo "${l##*/}"; }
grp() { local l; l=$(readlink $P/$1/iommu_group 2>/dev/null) || true; echo "${l##*/}"; }
ovr() { local o; o=$(cat $P/$1/driver_override 2>/dev/null); [ "$o" = "(null)" ] && o=; echo "$o"; }
now_ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }

expect_drv() { # BDF DRIVER [what]
    [ "$(drv $1)" = "$2" ] || die "${3:-$1}: driver is '$(drv $1)', expected '$2'"
}
wait_drv() { # BDF DRIVER TENTHS
    local i=0
    while [ "$(drv $1)" != "$2" ] && [ $i -lt ${3:-50} ]; do usleep 100000; i=$((i + 1)); done
    [ "$(drv $1)" = "$2" ]
}

# Put a device back on whatever its own driver is (override cleared, probe).
host_bind() { # BDF
    echo > $P/$1/driver_override
    if [ -e $P/$1/driver ]; then echo $1 > $P/$1/driver/unbind; fi
    echo $1 > /sys/bus/pci/drivers_probe
}

# Move a device to vfio-pci the way libvirt does (override, unbind, drivers_probe).
vfio_bind() { # BDF
    echo vfio-pci > $P/$1/driver_override
    if [ -e $P/$1/driver ]; then echo $1 > $P/$1/driver/unbind; fi
    echo $1 > /sys/bus/pci/drivers_probe
}

# One line per PCI device: BDF driver override. Used to prove "everything ends where it began".
pci_state() {
    local d b
    for d in $P/*; do
        b=${d##*/}
        echo "$b driver=$(drv $b) override=$(ovr $b)"
    done
}
state_diff() { # FILE_BEFORE -> prints differences against now, returns 1 if any
    pci_state > $T/state.now
    if ! diff $1 $T/state.now > $T/state.diff; then
        cat $T/state.diff
        return 1
    fi
}

standin_node() { # BDF -> /dev/standinN (from the misc device under the PCI device)
    local m
    m=$(ls $P/$1/misc 2>/dev/null | head -n1)
    [ -n "$m" ] && echo /dev/$m
}

# Start `hold` on the given nodes in the background; sets HOLD_PID.
hold_start() { hold_run hold "$@"; }   # PATH...: open device nodes
hold_run() { # CMD ARGS...: start a holder that prints "held <pid>" once it holds
    rm -f $T/hold.out
    "$@" > $T/hold.out 2>&1 &
    HOLD_PID=$!
    echo $HOLD_PID >> $T/holders
    trap hold_stop EXIT     # never leave a holder behind: it would wedge later unbinds
    local i=0
    while ! grep -q held $T/hold.out 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 50 ] || die "hold did not open $*: $(cat $T/hold.out)"
        usleep 100000
    done
}
hold_stop() {
    if [ -n "$HOLD_PID" ]; then kill $HOLD_PID 2>/dev/null || true; wait $HOLD_PID 2>/dev/null || true; fi
    HOLD_PID=
}
note() { echo "note: $*"; }   # shown under the PASS/FAIL line
# The kernel log as "nothing was logged" checks compare it: without "hrtimer: interrupt took N ns",
# which kernel/time/hrtimer.c prints (once a boot) when a timer interrupt ran late, as it does at
# any moment under TCG on a loaded machine (seen on 6.12 during hostprep.idempotent), from no device.
kernel_log() { dmesg | grep -v 'hrtimer: interrupt took'; }

# After a failed test: put every device back to its boot driver so later tests start clean.
restore_boot_state() {
    local b d o
    # What a test killed by its timeout left to undo (operator.sh: the module tree, standin).
    if [ -s $T/undo.sh ]; then echo "  | running $T/undo.sh"; sh $T/undo.sh 2>&1 | sed 's/^/  | /'; fi
    # What a failed test may have left switched on: standin's probe refusal, the nvme VFs.
    if [ -w /sys/module/standin/parameters/refuse_probe ]; then echo > /sys/module/standin/parameters/refuse_probe; fi
    if [ -w /sys/module/standin/parameters/stall_probe ]; then echo > /sys/module/standin/parameters/stall_probe; fi
    if [ "$(cat $P/$NVME/sriov_numvfs 2>/dev/null)" != 0 ]; then (echo 0 > $P/$NVME/sriov_numvfs) 2>/dev/null || true; fi
    (echo 1 > $P/$NVME/sriov_drivers_autoprobe) 2>/dev/null || true
    pci_state > $T/state.now
    diff $T/state.boot $T/state.now | sed -n 's/^-\([0-9a-f:.]*\) driver=\([^ ]*\) .*/\1 \2/p' |
    while read -r b d; do
        echo "  | restoring $b to '$d'"
        host_bind $b 2>/dev/null || true
    done
}

# --- runner --------------------------------------------------------------------------------
NPASS=0
NFAIL=0
NSKIP=0
# hp.tests=PATTERN[,PATTERN...] on the kernel command line (HOSTPREP_VM_TESTS for run-tests.sh)
# runs only the tests whose name contains one of the PATTERNs; the others are not counted.
ONLY_TESTS=$(sed -n 's/.*hp\.tests=\([^ ]*\).*/\1/p' /proc/cmdline 2>/dev/null)
run_test() { # NAME FUNCTION [TIMEOUT_SECONDS]
    local name=$1 fn=$2 to=${3:-60} rc t0 t1
    if [ -n "$ONLY_TESTS" ]; then
        local p only=
        for p in $(echo "$ONLY_TESTS" | tr ',' ' '); do case $name in *"$p"*) only=1 ;; esac; done
        [ -n "$only" ] || return 0
    fi
    rm -f $T/why $T/holders
    t0=$(now_ms)
    timeout -s KILL $to sh -c ". /tests/lib.sh; . /tests/cases.sh; set -e; $fn" > $T/$name.log 2>&1
    rc=$?
    t1=$(now_ms)
    if [ $rc = 0 ]; then
        echo "PASS $name ($((t1 - t0)) ms)"
        grep '^note: ' $T/$name.log | sed 's/^/  /'
        NPASS=$((NPASS + 1))
    elif [ $rc = 77 ]; then
        echo "SKIP $name: $(cat $T/why 2>/dev/null)"
        NSKIP=$((NSKIP + 1))
    else
        if [ -s $T/why ]; then why=$(cat $T/why); elif [ $rc = 137 ]; then why="timed out after ${to}s"; else why="exit $rc"; fi
        echo "FAIL $name: $why"
        sed 's/^/  | /' $T/$name.log | tail -n 40
        echo "  | --- dmesg tail"
        dmesg | tail -n 15 | sed 's/^/  | /'
        NFAIL=$((NFAIL + 1))
        # A holder left by a killed test would wedge every later unbind.
        for p in $(cat $T/holders 2>/dev/null); do kill $p 2>/dev/null; done
        [ -s $T/state.boot ] && restore_boot_state
    fi
}
skip() { echo "$*" > $T/why; exit 77; }
summary() {
    [ $NSKIP = 0 ] || echo "($NSKIP skipped)"
    echo "$NPASS passed, $NFAIL failed"
}

# --- hostprep ------------------------------------------------------------------------------
HP_IDS="--gpu-ids 1234:11e8 --host-driver standin"
# hp ARGS... : runs hostprep, output in $T/hp.out (echoed to the log), exit code in HP_RC.
hp() {
    local t0
    t0=$(now_ms)
    echo "\$ hostprep $*"
    set +e
    hostprep "$@" > $T/hp.out 2>&1
    HP_RC=$?
    set -e
    HP_MS=$(( $(now_ms) - t0 ))
    sed 's/^/    /' $T/hp.out
    echo "    (exit $HP_RC, $HP_MS ms)"
}
# hp_bg DEADLINE_TENTHS ARGS... : run hostprep in the background and wait at most DEADLINE;
# HP_RC is empty when it did not finish (then HP_PID is still running).
hp_bg() {
    local lim=$1 i=0 t0
    shift
    t0=$(now_ms)
    echo "\$ hostprep $* &"
    rm -f $T/hp.rc
    (set +e; hostprep "$@" > $T/hp.out 2>&1; echo $? > $T/hp.rc) &
    HP_PID=$!
    while [ ! -e $T/hp.rc ] && [ $i -lt $lim ]; do usleep 100000; i=$((i + 1)); done
    HP_MS=$(( $(now_ms) - t0 ))
    HP_RC=$(cat $T/hp.rc 2>/dev/null || true)
    sed 's/^/    /' $T/hp.out
    echo "    (exit ${HP_RC:-still running}, $HP_MS ms)"
}
hp_expect() { # RC ARGS... : run hostprep and require exit RC
    local want=$1; shift
    hp "$@"
    [ "$HP_RC" = "$want" ] || die "hostprep $*: exit $HP_RC, expected $want: $(tail -n 3 $T/hp.out | tr '\n' ' ')"
}
journal_exists() { [ -e /run/hostprep/journal.json ]; }
expect_no_journal() { ! journal_exists || die "journal left in /run/hostprep: $(cat /run/hostprep/journal.json | head -c 300)"; }
expect_boot_state() { # [what]
    state_diff $T/state.boot > $T/sd.out || die "${1:-state} differs from boot: $(tr '\n' ';' < $T/sd.out)"
}
expect_vfio_group() { # BDF: on vfio-pci, /dev/vfio/<group> present, group viable and attachable
    local g
    expect_drv $1 vfio-pci
    g=$(grp $1)
    [ -c /dev/vfio/$g ] || die "/dev/vfio/$g missing for $1"
    vfio-group-status --attach $g > $T/vgs.out 2>&1 || die "$1: $(cat $T/vgs.out)"
}
back_to_container() { # --devices list
    hp_expect 0 prepare --mode container $HP_IDS --devices "$1"
}
