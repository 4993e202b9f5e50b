#!/bin/bash
# The libraries each executable asks the loader for (readelf -d, DT_NEEDED):
#   hostprep             never libsimdjson; with HOSTPREP_STATIC_CXX, no libstdc++ or libgcc_s,
#                        and in an optimised build (the build to ship is MinSizeRel) no libm: fmt
#                        is built without long double, whose formatting was its one call into
#                        libm (ceil). Unoptimised, the compiler keeps that dead code, and libm.
#   hostprep-check-node  libsimdjson (check-node's node lists)
# usage: needed_test.sh HOSTPREP HOSTPREP_CHECK_NODE STATIC_CXX(ON|OFF) [CMAKE_BUILD_TYPE]
set -euo pipefail
hp=$1 cn=$2 static=$3 type=${4:-}
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
fail=0
hpn=$(needed "$hp")
cnn=$(needed "$cn")
echo "hostprep: $(echo $hpn)"
echo "hostprep-check-node: $(echo $cnn)"
if grep -q '^libsimdjson' <<<"$hpn"; then echo "FAIL: hostprep needs libsimdjson"; fail=1; fi
if ! grep -q '^libsimdjson' <<<"$cnn"; then echo "FAIL: hostprep-check-node does not need libsimdjson"; fail=1; fi
if [[ $static =~ ^(ON|on|1|TRUE|true|YES|yes)$ ]]; then
    for lib in libstdc++ libgcc_s; do
        if grep -q "^$lib\." <<<"$hpn"; then echo "FAIL: hostprep needs $lib (HOSTPREP_STATIC_CXX is on)"; fail=1; fi
    done
    if [[ $type =~ ^(MinSizeRel|Release|RelWithDebInfo)$ ]]; then
        if grep -q '^libm\.' <<<"$hpn"; then echo "FAIL: hostprep needs libm ($type build)"; fail=1; fi
    else
        echo "libm: not checked in a build without optimisation (CMAKE_BUILD_TYPE '$type')"
    fi
fi
exit $fail
