#!/bin/sh
# The VM benchmarks (tests/bench/run boots this with --suite bench). Not tests: prints figures as
# "BENCH <name> <value>" lines (one per repetition; the host takes medians), and at the end the
# usual "N passed, N failed" line, where a failure means a benchmark could not run as designed
# (a switch that did not end where it should, a missed status update).
# Needs /usr/local/bin/benchtool (tests/bench/vm/benchtool.c; tests/bench/run appends it to the
# initramfs). Repetitions: hp.n=N (switch), hp.nslow=N (slow teardown), hp.nagent=N (rebinds);
# hp.only=agent runs only the agent benchmark (tests/bench/run --agent-only), hp.only=switch only
# the switch and slow-teardown rows (tests/bench/run --switch-only). Stand-in GPUs beyond the
# test topology's (tests/vm/run-vm.sh --bench-gpus N: edu at 00:0b.0 up, each in its own group)
# add the slow teardown of 8 GPUs: A, B, C, E and four of them. Each hostprep switch and slow
# teardown runs once more under "benchtool time --fixed-addresses" (no address-space
# randomization: TCG finds its translation of the run before), reported apart, without a verdict.
# hp.only=ab (tests/bench/run --ab OLD) runs only the A/B rounds: this hostprep and
# /usr/local/bin/hostprep-old in alternation, hp.n rounds; hp.only=abagent (--ab OLD
# --agent-only) the agent's benchmark the same way, hp.n rounds of hp.nagent / hp.n rebinds each.
. /tests/lib.sh
N=11; NSLOW=5; NAGENT=100; ONLY=
for arg in $(cat /proc/cmdline); do
    case $arg in
        hp.only=*) ONLY=${arg#hp.only=} ;;
        hp.n=*) N=${arg#hp.n=} ;;
        hp.nslow=*) NSLOW=${arg#hp.nslow=} ;;
        hp.nagent=*) NAGENT=${arg#hp.nagent=} ;;
    esac
done
BT=/usr/local/bin/benchtool
NOK=0; NBAD=0
ok() { NOK=$((NOK + 1)); }
bad() { echo "FAIL $*"; NBAD=$((NBAD + 1)); }

for m in e1000e nvme snd_hda_intel standin; do modprobe $m || echo "HPVM: modprobe $m failed"; done
for i in 1 2 3 4 5 6 7 8 9 10; do
    [ "$(drv $HDA_C)" = snd_hda_intel ] && [ "$(drv $NVME)" = nvme ] && break
    usleep 200000
done
# Both sides start with vfio loaded (busybox modprobe ignores vfio's softdep on type1).
modprobe vfio_iommu_type1; modprobe vfio_pci
pci_state > $T/state.boot
[ -x $BT ] || { echo "FAIL bench: no $BT in the initramfs"; echo "0 passed, 1 failed"; exit 0; }

# The four stand-in GPUs hostprep may move (D shares its group with a foreign NIC: refused) and
# every function that moves with them: C's audio companion, E's USB companion (E's bridge stays).
GPUS=$EDU_A,$EDU_B,$EDU_C,$EDU_E
FUNCS="$EDU_A $EDU_B $EDU_C $HDA_C $EDU_E $OHCI_E"
HPIDS="--gpu-ids 1234:11e8 --host-driver standin --devices $GPUS"
# The bench-only stand-ins (00:0b.0 and up), when run-vm.sh added them.
EXTRA=
for d in $P/0000:00:*; do
    b=${d##*/}
    case $b in 0000:00:0[0-9a].*) continue ;; esac
    [ "$(cat $d/vendor):$(cat $d/device)" = 0x1234:0x11e8 ] && EXTRA="$EXTRA $b"
done
set -- $EXTRA
if [ $# -ge 4 ]; then
    GPUS8="$GPUS,$1,$2,$3,$4"
    FUNCS8="$FUNCS $1 $2 $3 $4"
    HPIDS8="--gpu-ids 1234:11e8 --host-driver standin --devices $GPUS8"
fi

# The physical limit: exactly the writes hostprep's plan makes (override, unbind from the current
# driver, drivers_probe; per function, in plan order), as bare writes from one process.
writes_to() { # DRIVER|"" -> $T/writes
    local b d
    : > $T/writes
    for b in $FUNCS; do
        echo "$P/$b/driver_override $1" >> $T/writes
        d=$(drv $b)
        [ -z "$d" ] || echo "/sys/bus/pci/drivers/$d/unbind $b" >> $T/writes
        echo "/sys/bus/pci/drivers_probe $b" >> $T/writes
    done
}
on_vfio() { local b; for b in ${1:-$FUNCS}; do [ "$(drv $b)" = vfio-pci ] || return 1; done; }
timed() { # [--fixed-addresses] NAME CMD... : prints "BENCH NAME <ms>"; a non-zero exit fails
    local fixed= name r
    [ "$1" = --fixed-addresses ] && { fixed=$1; shift; }
    name=$1
    shift
    r=$($BT time $fixed $T/timed.out "$@")
    echo "BENCH $name ${r% *}"
    [ "${r#* }" = 0 ] || { bad "$name: exit ${r#* }: $(tail -n 3 $T/timed.out | tr '\n' ' ')"; return 1; }
}
# hostprep to vm-passthrough and back, each direction timed (NAME.to_vfio, NAME.back) and checked.
switch_hostprep() { # [--fixed-addresses] NAME
    local fixed=
    [ "$1" = --fixed-addresses ] && { fixed=$1; shift; }
    timed $fixed $1.to_vfio hostprep prepare --mode vm-passthrough $HPIDS
    on_vfio || bad "$1: hostprep left $(pci_state | grep -v vfio-pci | grep -E "$(echo $FUNCS | tr ' ' '|')" | head -1)"
    timed $fixed $1.back hostprep prepare --mode container $HPIDS
    state_diff $T/state.boot > $T/sd || bad "$1: back: $(tr '\n' ';' < $T/sd)"
}
# One slow teardown: CMD, timed as NAME, must move FUNCS to vfio-pci; hostprep (IDS) then puts
# them back, untimed.
teardown() { # [--fixed-addresses] NAME IDS FUNCS CMD...
    local fixed= name ids funcs
    [ "$1" = --fixed-addresses ] && { fixed=$1; shift; }
    name=$1 ids=$2 funcs=$3
    shift 3
    timed $fixed $name "$@"
    on_vfio "$funcs" || bad "$name: did not move every function"
    hostprep prepare --mode container $ids > $T/back.out 2>&1 || bad "$name: back: $(tail -n 3 $T/back.out)"
}

# Where one run's time goes (--log-level debug prints a "time:" line per phase and per step).
for m in vm-passthrough container; do
    echo "HPVM: breakdown of prepare --mode $m (debug log)"
    hostprep --log-level debug prepare --mode $m $HPIDS > $T/bd.out 2>&1 || bad "breakdown: $m: $(tail -n 2 $T/bd.out)"
    grep 'time:' $T/bd.out | sed 's/^debug: time: /HPVM:   /'
done

# A/B (tests/bench/run --ab OLD): this build's hostprep and another, /usr/local/bin/hostprep-old,
# in alternation, N rounds, so that both meet the same guest and the same moment of this noisy
# machine. ab_rounds FUNC calls "FUNC new|old BINARY" for each build in each round; which goes
# first alternates too, so neither always runs right after the other.
OLD=/usr/local/bin/hostprep-old
ab_old_runs() {
    $OLD --version > $T/old.version 2>&1 && return 0
    bad "ab: $OLD does not run in this guest: $(head -n 2 $T/old.version | tr '\n' ' ')"
    return 1
}
ab_rounds() { # FUNC
    local i=0 order which
    while [ $i -lt $N ]; do
        order="new old"
        [ $((i % 2)) = 1 ] && order="old new"
        for which in $order; do
            if [ $which = old ]; then "$1" old $OLD; else "$1" new hostprep; fi
        done
        i=$((i + 1))
    done
}

# hp.only=ab: each build to vm-passthrough and back, with address-space randomization and
# without, under --log-level debug: "BENCH ab.<new|old>[_fixed].run <ms>" for the whole process
# (timed) and one "BENCH ab.<...>.<phase> <ms>" per "time:" phase (steps left out).
ab_prepare() { # new|old BINARY
    local fx key m
    for fx in "" --fixed-addresses; do
        key=$1${fx:+_fixed}
        for m in vm-passthrough container; do
            timed $fx ab.$key.run $2 --log-level debug prepare --mode $m $HPIDS
            awk -v k="ab.$key" '/^debug: time: / && !/^debug: time: step / {
                ms = $(NF - 1); sub(/^debug: time: /, ""); sub(/ [0-9.]+ ms$/, "")
                gsub(/[^a-z0-9]+/, "_"); sub(/_$/, ""); print "BENCH " k "." $0, ms }' $T/timed.out
            if [ $m = vm-passthrough ]; then
                on_vfio || bad "ab: $key left a function off vfio-pci"
            else
                state_diff $T/state.boot > $T/sd || bad "ab: $key back: $(tr '\n' ';' < $T/sd)"
            fi
        done
    done
}
if [ "$ONLY" = ab ] && ab_old_runs; then
    echo "HPVM: bench ab: $N rounds, $(hostprep --version | head -n 1) against $(head -n 1 $T/old.version)"
    ab_rounds ab_prepare
    ok
fi

if [ "$ONLY" != agent ] && [ "$ONLY" != ab ] && [ "$ONLY" != abagent ]; then
echo "HPVM: bench switch: $N repetitions, functions $FUNCS"
# One untimed round first: vfio-pci's first probe of each device, page cache for the binary.
hostprep prepare --mode vm-passthrough $HPIDS > $T/warm.out 2>&1 || bad "warm-up: $(tail -n 3 $T/warm.out)"
hostprep prepare --mode container $HPIDS > $T/warm.out 2>&1 || bad "warm-up back: $(tail -n 3 $T/warm.out)"
i=0
while [ $i -lt $N ]; do
    switch_hostprep switch.hostprep
    # The same with hostprep's code at the addresses of its run before (see tests/bench/README.md).
    switch_hostprep --fixed-addresses switch.hostprep_fixed
    writes_to vfio-pci
    timed switch.writes.to_vfio $BT writes $T/writes
    on_vfio || bad "switch: bare writes left a function off vfio-pci"
    writes_to ""
    timed switch.writes.back $BT writes $T/writes
    state_diff $T/state.boot > $T/sd || bad "switch: bare writes back: $(tr '\n' ';' < $T/sd)"
    # The floor for a program linked as hostprep is (tests/bench/run builds both): the same
    # writes from benchtool as a dynamically linked PIE and as a static PIE.
    for v in dynamic static_pie; do
        writes_to vfio-pci
        timed switch.writes_$v.to_vfio $BT-$v writes $T/writes
        on_vfio || bad "switch: bare writes ($v) left a function off vfio-pci"
        writes_to ""
        timed switch.writes_$v.back $BT-$v writes $T/writes
        state_diff $T/state.boot > $T/sd || bad "switch: bare writes ($v) back: $(tr '\n' ';' < $T/sd)"
    done
    # The peer on the fast path: vfio-manage's per-device sequence (the slow teardown's
    # baseline), given every function hostprep moves; back with the bare writes, untimed.
    timed switch.vfio_manage.to_vfio sh /tests/bench-vfio-manage.sh $FUNCS
    on_vfio || bad "switch: vfio-manage left a function off vfio-pci"
    writes_to ""
    $BT writes $T/writes > $T/vm.out 2>&1 || bad "switch: vfio-manage back: $(tail -n 2 $T/vm.out)"
    state_diff $T/state.boot > $T/sd || bad "switch: vfio-manage back: $(tr '\n' ';' < $T/sd)"
    i=$((i + 1))
done
ok

echo "HPVM: bench slow teardown: $NSLOW repetitions, remove_delay_ms=1000"
echo 1000 > /sys/module/standin/parameters/remove_delay_ms
echo "HPVM: breakdown of a slow teardown, 4 GPUs (debug log)"
hostprep --log-level debug prepare --mode vm-passthrough $HPIDS > $T/bd.out 2>&1 || bad "breakdown: slow: $(tail -n 2 $T/bd.out)"
grep 'time:' $T/bd.out | sed 's/^debug: time: /HPVM:   /'
hostprep prepare --mode container $HPIDS > $T/back.out 2>&1 || bad "slow: back: $(tail -n 3 $T/back.out)"
i=0
while [ $i -lt $NSLOW ]; do
    teardown slow.hostprep "$HPIDS" "$FUNCS" hostprep prepare --mode vm-passthrough $HPIDS
    teardown --fixed-addresses slow.hostprep_fixed "$HPIDS" "$FUNCS" hostprep prepare --mode vm-passthrough $HPIDS
    teardown slow.vfio_manage "$HPIDS" "$FUNCS" sh /tests/bench-vfio-manage.sh $FUNCS
    state_diff $T/state.boot > $T/sd || bad "slow: not back at boot state: $(tr '\n' ';' < $T/sd)"
    i=$((i + 1))
done
if [ -n "${GPUS8:-}" ]; then
    echo "HPVM: bench slow teardown, 8 GPUs ($GPUS8): $NSLOW repetitions"
    echo "HPVM: breakdown of a slow teardown, 8 GPUs (debug log)"
    hostprep --log-level debug prepare --mode vm-passthrough $HPIDS8 > $T/bd.out 2>&1 || bad "breakdown: slow8: $(tail -n 2 $T/bd.out)"
    grep 'time:' $T/bd.out | sed 's/^debug: time: /HPVM:   /'
    hostprep prepare --mode container $HPIDS8 > $T/back.out 2>&1 || bad "slow8: back: $(tail -n 3 $T/back.out)"
    i=0
    while [ $i -lt $NSLOW ]; do
        teardown slow8.hostprep "$HPIDS8" "$FUNCS8" hostprep prepare --mode vm-passthrough $HPIDS8
        teardown --fixed-addresses slow8.hostprep_fixed "$HPIDS8" "$FUNCS8" hostprep prepare --mode vm-passthrough $HPIDS8
        teardown slow8.vfio_manage "$HPIDS8" "$FUNCS8" sh /tests/bench-vfio-manage.sh $FUNCS8
        state_diff $T/state.boot > $T/sd || bad "slow8: not back at boot state: $(tr '\n' ';' < $T/sd)"
        i=$((i + 1))
    done
fi
echo 0 > /sys/module/standin/parameters/remove_delay_ms
ok

fi # hp.only

if [ -z "$ONLY" ]; then
echo "HPVM: bench preflight and where a run's time goes (guest)"
i=0
while [ $i -lt 5 ]; do
    for c in "preflight.guest preflight --mode vm-passthrough $HPIDS" \
             "cost.startup --version" \
             "cost.dry_run prepare --mode vm-passthrough --dry-run $HPIDS" \
             "cost.status status"; do
        set -- $c
        name=$1; shift
        $BT time $T/c.out hostprep "$@" > $T/c.t
        echo "BENCH $name $(cut -d' ' -f1 $T/c.t)"
    done
    $BT time --fixed-addresses $T/c.out hostprep --version > $T/c.t
    echo "BENCH cost.startup_fixed $(cut -d' ' -f1 $T/c.t)"
    i=$((i + 1))
done

fi # hp.only

# The agent's benchmark: `BIN agent` on the config below; N external rebinds of B timed by
# benchtool: "BENCH KEY.latency" and "BENCH KEY.rebind_writes" per rebind, and
# "BENCH KEY.minflt_per_rebind", the agent's minor page faults over the rebinds per rebind.
# WARM rebinds first, outside the N: an agent's first events run code it has not run before,
# which TCG translates then (a few in a hundred rebinds, but one in ten of an A/B round's); the
# first of them is reported on its own as "BENCH KEY.first_latency".
agent_config() {
    mkdir -p /etc/hostprep
    cat > /etc/hostprep/config.yaml <<EOF
mode: container
selection:
  gpu-ids: ["1234:11e8"]
  devices: ["$EDU_A", "$EDU_B", "$EDU_C", "$EDU_E"]
host-driver: standin
status:
  path: /run/hostprep/status.json
reconcile: false
EOF
    chmod 0644 /etc/hostprep/config.yaml
}
agent_start() { # BIN: the agent runs as $AGENT once it has published its first status
    local i=0
    rm -f /run/hostprep/status.json
    $1 agent > $T/agent.log 2>&1 &
    AGENT=$!
    while [ ! -s /run/hostprep/status.json ] && [ $i -lt 100 ]; do usleep 100000; i=$((i + 1)); done
    [ -s /run/hostprep/status.json ] && return 0
    bad "agent ($1): no status after 10 s: $(tail -n 5 $T/agent.log | tr '\n' ' ')"
    return 1
}
minflt() { awk '{ print $10 }' /proc/$1/stat; }  # proc(5): field 10, minflt
agent_latency() { # KEY N [WARM]
    local f0 f1
    if [ "${3:-0}" -gt 0 ]; then
        $BT agent /run/hostprep/status.json $EDU_B standin $3 > $T/warm.lat 2> $T/lat.err \
            || bad "agent: warm-up: $(cat $T/lat.err)"
        # The first rebind after the agent's start, on its own (cold: code run for the first time).
        echo "BENCH $1.first_latency $(awk 'NR == 1 { print $1 }' $T/warm.lat)"
    fi
    f0=$(minflt $AGENT)
    $BT agent /run/hostprep/status.json $EDU_B standin $2 > $T/lat 2> $T/lat.err \
        && ok || bad "agent: $(cat $T/lat.err)"
    f1=$(minflt $AGENT)
    cat $T/lat.err
    awk -v k="$1" '{ print "BENCH " k ".latency", $1; print "BENCH " k ".rebind_writes", $2 }' $T/lat
    echo "BENCH $1.minflt_per_rebind $(awk -v a="$f0" -v b="$f1" -v n="$2" 'BEGIN { printf "%.1f", (b - a) / n }')"
}
agent_stop() { kill $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; }

# hp.only=abagent (tests/bench/run --ab OLD --agent-only): each build's agent started in turn,
# NAGENT / N rebinds each after 3 untimed ones.
ab_agent() { # new|old BINARY
    agent_start $2 && agent_latency ab.$1.agent $(( (NAGENT + N - 1) / N )) 3
    agent_stop
}
if [ "$ONLY" = abagent ] && ab_old_runs; then
    echo "HPVM: bench ab agent: $N rounds of $(( (NAGENT + N - 1) / N )) rebinds each, $(hostprep --version | head -n 1) against $(head -n 1 $T/old.version)"
    agent_config
    ab_rounds ab_agent
fi

if [ "$ONLY" != switch ] && [ "$ONLY" != ab ] && [ "$ONLY" != abagent ]; then
echo "HPVM: bench agent: $NAGENT rebinds of $EDU_B after 3 warm-up rebinds"
agent_config
if agent_start hostprep; then
    agent_latency agent $NAGENT 3
    echo "BENCH agent.rss_kib $(awk '/^VmRSS:/ { print $2 }' /proc/$AGENT/status)"
    echo "BENCH agent.hwm_kib $(awk '/^VmHWM:/ { print $2 }' /proc/$AGENT/status)"
    # What the resident memory is made of: the totals, then the resident KiB of each mapped
    # file (anonymous mappings as [anon], the heap as [heap]), largest first.
    grep -E '^(Rss|Pss|Shared_Clean|Private_Clean|Private_Dirty|Anonymous|AnonHugePages):' \
        /proc/$AGENT/smaps_rollup 2>/dev/null | sed 's/^/HPVM: agent smaps_rollup /'
    # Transparent huge pages: the guest's setting and the agent's (0: it opted out, prctl(2)).
    echo "HPVM: agent transparent_hugepage $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)," \
        "$(grep '^THP_enabled:' /proc/$AGENT/status | tr -s '\t ' ' ')"
    awk '/^[0-9a-f]+-[0-9a-f]+ / { name = NF >= 6 ? $6 : "[anon]" }
         /^Rss:/ { rss[name] += $2 }
         END { for (n in rss) if (rss[n] > 0) print rss[n], n }' /proc/$AGENT/smaps \
        | sort -rn | head -n 12 | sed 's/^/HPVM: agent rss_kib /'
    sleep 2
    c0=$($BT ctxsw $AGENT)
    sleep 10
    c1=$($BT ctxsw $AGENT)
    echo "BENCH agent.idle_wakeups_10s $((c1 - c0))"
    echo "BENCH agent.threads $(ls /proc/$AGENT/task | wc -l)"
fi
agent_stop
tail -n 3 $T/agent.log | sed 's/^/  agent: /'
fi # hp.only

state_diff $T/state.boot > $T/sd || bad "final state differs from boot: $(tr '\n' ';' < $T/sd)"
echo "$NOK passed, $NBAD failed"
