#!/bin/bash
# How hostprep, a root daemon, and hostprep-check-node, which it runs, are linked (readelf -d
# and -l):
#   PIE (address-space randomisation), full RELRO (a PT_GNU_RELRO segment and BIND_NOW: the GOT is
#   read-only once the loader has bound every symbol), a stack that is not executable
#   (PT_GNU_STACK without E), and its relative relocations packed (DT_RELR).
# usage: hardening_test.sh EXECUTABLE...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: hardening_test.sh EXECUTABLE..." >&2; exit 2; }
fail=0
for exe in "$@"; do
    dyn=$(readelf -d -W "$exe")
    seg=$(readelf -l -W "$exe")
    name=$(basename "$exe")
    check() { # WHAT COMMAND...
        local what=$1; shift
        if "$@"; then echo "ok: $name: $what"; else echo "FAIL: $name: $what"; fail=1; fi
    }
    check "PIE" grep -Eq 'FLAGS_1.*\bPIE\b' <<<"$dyn"
    check "BIND_NOW" grep -Eq '\(FLAGS\).*\bBIND_NOW\b|FLAGS_1.*\bNOW\b' <<<"$dyn"
    check "a GNU_RELRO segment" grep -q 'GNU_RELRO' <<<"$seg"
    check "a stack that is not executable" \
        bash -c 'grep "GNU_STACK" <<<"$1" | grep -Eq " RW +0x"' _ "$seg"
    check "packed relative relocations (DT_RELR)" grep -q '(RELR)' <<<"$dyn"
done
exit $fail
