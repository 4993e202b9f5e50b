# The SIGKILL sweep on the real kernel (busybox sh; sourced by run_test with lib.sh and cases.sh).
#
# `hostprep prepare` is SIGKILLed at points spread over a whole switch of A, B and C (C brings its
# audio companion: 4 functions in 3 groups, moved by parallel lanes), in each direction:
# container -> vm-passthrough, then vm-passthrough -> container. Per direction, a clean switch is
# watched first: how many changes of the journal and of the functions' drivers and overrides the
# poller below sees, and when the journal came and went. Then the points:
#   aimed: killed as soon as the k-th such change is seen (k = 1.. up to SK_AIMED);
#   timed: killed t ms after the journal appeared (it is written just before the first step), t
#          spread evenly over the watched journal's lifetime (up to SK_POINTS in all). Counting
#          from the journal, not from the start, keeps the points on the steps however long the
#          start-up takes on a loaded machine.
# After each kill the state is classified (the journal left, a group half-moved: its functions
# neither all where they started nor all where the switch takes them), then the next run either
# completes the switch (odd points; then the other mode must restore every original driver and
# driver_override) or, in the other mode, rolls it back (even points; the same check). The report
# (a note under the PASS line) gives the points and how many landed mid-plan; the test fails if
# fewer than SK_MIN_MID landed mid-plan or none with a group half-moved, in either direction.
# A group is half-moved only between a function's unbind and its probe, a few milliseconds of a
# switch that now lasts ~50 ms under TCG: when none of the points landed there, or fewer than
# SK_MIN_MID mid-plan, up to SK_EXTRA more are taken, timed at the midpoints of a finer spread
# over the journal's lifetime, until both hold (the report says how many it took). That lifetime
# is watched once more first: on 2 CPUs the guest's speed changes when another VM test starts or
# ends (one CI run watched a 680 ms journal under load, then saw the switches take a third of it,
# and 10 of 14 points came after the end).
SK_DEVS="$EDU_A,$EDU_B,$EDU_C"
SK_POINTS=10
SK_AIMED=5
SK_MIN_MID=3
SK_EXTRA=10

# SIG: a string that changes whenever the journal comes or goes or a plan function's driver or
# driver_override changes. One subshell per look, so that the poller keeps up with the lanes.
sk_sig() {
    SIG=$( { [ -e /run/hostprep/journal.json ] && echo journal
             cat $P/$EDU_A/driver_override $P/$EDU_B/driver_override $P/$EDU_C/driver_override $P/$HDA_C/driver_override
             ls -l $P/$EDU_A/driver $P/$EDU_B/driver $P/$EDU_C/driver $P/$HDA_C/driver
             true; } 2>/dev/null )   # a missing driver link is a state, not an error
}

# Whether PID is still running (not a zombie), with builtins only.
sk_alive() { # PID
    local line
    read -r line < /proc/$1/stat 2>/dev/null || return 1
    set -- $line
    [ "$3" != Z ]
}

# sk_run MODE HOW AT: prepare MODE in the background, SIGKILLed at the AT-th change of SIG
# (HOW=change), or AT ms after the journal appeared (HOW=journal). Sets SK_RC (137: killed; else it
# ended first), SK_SEEN (changes seen), SK_J0/SK_J1 (ms from the start until the journal appeared /
# went, as the change poller saw them), SK_C0/SK_C1 (ms until the first / last change), SK_MS.
sk_run() {
    local mode=$1 how=$2 at=$3 prev pid t0 t
    sk_sig; prev=$SIG
    SK_SEEN=0; SK_J0=0; SK_J1=0; SK_C0=0; SK_C1=0
    t0=$(now_ms)
    hostprep prepare --mode $mode $HP_IDS --devices $SK_DEVS > $T/sk.out 2>&1 &
    pid=$!
    if [ $how = journal ]; then
        # Builtins only: the journal is written just before the first step.
        while sk_alive $pid && [ ! -e /run/hostprep/journal.json ]; do :; done
        [ $at = 0 ] || usleep $((at * 1000))
    else
        while sk_alive $pid; do
            sk_sig
            [ "$SIG" != "$prev" ] || continue
            prev=$SIG; SK_SEEN=$((SK_SEEN + 1))
            t=$(( $(now_ms) - t0 ))
            [ $SK_C0 != 0 ] || SK_C0=$t
            SK_C1=$t
            case $SIG in
                journal*) [ $SK_J0 != 0 ] || SK_J0=$t ;;
                *) [ $SK_J0 = 0 ] || [ $SK_J1 != 0 ] || SK_J1=$t ;;
            esac
            [ $SK_SEEN -lt $at ] || break
        done
    fi
    kill -9 $pid 2>/dev/null || true
    set +e; wait $pid; SK_RC=$?; set -e
    SK_MS=$(( $(now_ms) - t0 ))
    # The journal's removal may come after the poller's last look.
    [ $SK_J0 = 0 ] || [ $SK_J1 != 0 ] || SK_J1=$SK_MS
}

# Where each plan function is: at ORIG, at TARGET, or neither; counts the point's landing.
sk_classify() { # ORIG_STATE TARGET_STATE
    local b at_orig=0 at_target=0 half=0 line
    pci_state > $T/sk.now
    # A group is half-moved when its functions are not all at the origin nor all at the target.
    for g in "$EDU_A" "$EDU_B" "$EDU_C $HDA_C"; do
        local o=0 t=0 n=0
        for b in $g; do
            line=$(grep "^$b " $T/sk.now)
            n=$((n + 1))
            if grep -qxF "$line" $1; then o=$((o + 1)); at_orig=$((at_orig + 1)); fi
            if grep -qxF "$line" $2; then t=$((t + 1)); at_target=$((at_target + 1)); fi
        done
        [ $o = $n ] || [ $t = $n ] || half=1
    done
    SK_N=$((SK_N + 1))
    [ "$SK_RC" = 137 ] || SK_ENDED=$((SK_ENDED + 1))
    if journal_exists; then SK_JOURNAL=$((SK_JOURNAL + 1)); fi
    [ $half = 0 ] || SK_HALF=$((SK_HALF + 1))
    # Mid-plan: the journal left, or the functions not all at one end of the switch.
    if journal_exists || [ $half = 1 ] || { [ $at_orig != 4 ] && [ $at_target != 4 ]; }; then
        SK_MID=$((SK_MID + 1))
    fi
    echo "  landed: rc $SK_RC after $SK_MS ms, journal $(journal_exists && echo yes || echo no), at origin $at_orig/4, at target $at_target/4, group half-moved $half"
}

sk_expect_state() { # STATE_FILE WHAT
    case $1 in *sk.container) wait_drv $HDA_C snd_hda_intel 30 || true ;; esac
    state_diff $1 > $T/sd.out || die "$2: $(tr '\n' ';' < $T/sd.out)"
    expect_no_journal
}

# One point: prepare MODE killed as sk_run HOW AT says, the landing classified, then the recovery
# checked: the next run completes the switch (odd points; the other mode then restores the
# origin) or, in the other mode, rolls it back (even points).
sk_point() { # MODE OTHER ORIG TARGET HOW AT WHAT
    local mode=$1 other=$2 orig=$3 target=$4 what=$7
    sk_run $mode $5 $6
    echo "$mode: point $((SK_N + 1)) at $what"
    sk_classify $orig $target
    if [ $((SK_N % 2)) = 1 ]; then
        hp_expect 0 prepare --mode $mode $HP_IDS --devices $SK_DEVS
        sk_expect_state $target "$mode, killed at $what: the next run did not complete the switch"
        hp_expect 0 prepare --mode $other $HP_IDS --devices $SK_DEVS
        sk_expect_state $orig "$mode, killed at $what: $other after the completed switch"
    else
        hp_expect 0 prepare --mode $other $HP_IDS --devices $SK_DEVS
        sk_expect_state $orig "$mode, killed at $what: $other did not roll back"
    fi
}

# The clean switch from ORIG with MODE, watched (how many changes, and when), then back with
# OTHER: sets SK_WIN, the journal's lifetime in ms (SK_SEEN as sk_run).
sk_watch() { # MODE OTHER ORIG TARGET
    local mode=$1 other=$2 orig=$3 target=$4
    sk_run $mode change 100000
    [ "$SK_RC" = 0 ] || die "$mode: the watched switch exited $SK_RC: $(tail -n 2 $T/sk.out | tr '\n' ' ')"
    sk_expect_state $target "$mode: the watched switch"
    echo "$mode: watched switch: $SK_SEEN changes, the journal from $SK_J0 to $SK_J1 ms, $SK_MS ms in all"
    if [ $SK_J0 = 0 ]; then
        # The poller (a subshell per look, slow under TCG) can miss a journal that lives a few
        # tens of ms, as a switch between fast drivers does. The journal is written before the
        # first step and removed after the last, so the span of the changes seen lies inside it.
        [ $SK_SEEN -gt 0 ] || die "$mode: the watched switch showed no change at all"
        SK_J0=$SK_C0; SK_J1=$SK_C1
        echo "$mode: the poller missed the journal; the points spread over the changes ($SK_C0 to $SK_C1 ms)"
    fi
    [ $SK_J1 -gt $SK_J0 ] || SK_J1=$((SK_J0 + 1))
    SK_WIN=$((SK_J1 - SK_J0))
    hp_expect 0 prepare --mode $other $HP_IDS --devices $SK_DEVS
    sk_expect_state $orig "$other: back to the origin"
}

# One direction: from ORIG (state file) with MODE to TARGET; OTHER is the mode back.
sk_direction() { # MODE OTHER ORIG TARGET
    local mode=$1 other=$2 orig=$3 target=$4 k=1 j=1 e aimed timed win win0 t
    SK_N=0; SK_MID=0; SK_JOURNAL=0; SK_HALF=0; SK_ENDED=0
    sk_watch $mode $other $orig $target
    aimed=$SK_SEEN; [ $aimed -le $SK_AIMED ] || aimed=$SK_AIMED
    timed=$((SK_POINTS - aimed))
    win=$SK_WIN; win0=$SK_WIN
    while [ $((k + j)) -le $((SK_POINTS + 1)) ]; do
        if [ $k -le $aimed ]; then
            sk_point $mode $other $orig $target change $k "change $k"; k=$((k + 1))
        else
            t=$((win * (j - 1) / timed))
            sk_point $mode $other $orig $target journal $t "journal + $t ms"; j=$((j + 1))
        fi
    done
    e=0
    if [ $SK_HALF -lt 1 ] || [ $SK_MID -lt $SK_MIN_MID ]; then
        sk_watch $mode $other $orig $target
        win=$SK_WIN
    fi
    while { [ $SK_HALF -lt 1 ] || [ $SK_MID -lt $SK_MIN_MID ]; } && [ $e -lt $SK_EXTRA ]; do
        t=$((win * (2 * e + 1) / (2 * SK_EXTRA)))
        sk_point $mode $other $orig $target journal $t "journal + $t ms (extra)"; e=$((e + 1))
    done
    SK_REPORT="$SK_N points ($aimed at the k-th change, $timed at the journal + 0..$win0 ms, $e extra over 0..$win ms), $SK_MID mid-plan (journal left $SK_JOURNAL, a group half-moved $SK_HALF), $SK_ENDED ended before the kill"
    echo "SWEEP $mode: $SK_REPORT"
    note "$(uname -r) $mode: $SK_REPORT"
    [ $SK_MID -ge $SK_MIN_MID ] || die "$mode: only $SK_MID of $SK_N points landed mid-plan"
    [ $SK_HALF -ge 1 ] || die "$mode: no point landed with a group half-moved"
}

hp_t_sigkill_sweep() {
    wait_drv $HDA_C snd_hda_intel 30 || true
    pci_state > $T/sk.container
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $SK_DEVS
    pci_state > $T/sk.vm
    for b in $EDU_A $EDU_B $EDU_C $HDA_C; do expect_drv $b vfio-pci; done
    hp_expect 0 prepare --mode container $HP_IDS --devices $SK_DEVS
    sk_expect_state $T/sk.container "the first round trip"
    sk_direction vm-passthrough container $T/sk.container $T/sk.vm
    hp_expect 0 prepare --mode vm-passthrough $HP_IDS --devices $SK_DEVS
    sk_expect_state $T/sk.vm "vm-passthrough before the sweep back"
    sk_direction container vm-passthrough $T/sk.vm $T/sk.container
    hp_expect 0 prepare --mode container $HP_IDS --devices $SK_DEVS
    expect_boot_state "after the SIGKILL sweep"
    expect_no_journal
}
