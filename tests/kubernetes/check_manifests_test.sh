#!/bin/bash
# CTest kubernetes.manifests: systemd/kubernetes (the kustomization and the resources it lists)
# and systemd/kubernetes/gpu-operator (the ClusterPolicy beside hostprep) pass check_manifests.py, and the broken kustomization in tests/kubernetes/bad fails it with
# exactly the problems in bad/expected.txt (so the checker catches what it claims to).
#   check_manifests_test.sh PYTHON SOURCE_DIR
set -uo pipefail
PY=$1 SRC=$2
HERE=$SRC/tests/kubernetes
rc=0
out=$("$PY" "$HERE/check_manifests.py" "$SRC/systemd/kubernetes") || { echo "FAIL systemd/kubernetes:"; echo "$out"; rc=1; }
[ $rc = 1 ] || echo "PASS systemd/kubernetes: $out"
# The ClusterPolicy to run beside (not part of the kustomization above).
if op=$("$PY" "$HERE/check_manifests.py" "$SRC/systemd/kubernetes/gpu-operator"); then
    echo "PASS systemd/kubernetes/gpu-operator: $op"
else
    echo "FAIL systemd/kubernetes/gpu-operator:"; echo "$op"; rc=1
fi
bad_rc=0
bad=$("$PY" "$HERE/check_manifests.py" "$HERE/bad") || bad_rc=$?
if [ $bad_rc = 1 ] && [ "$bad" = "$(cat "$HERE/bad/expected.txt")" ]; then
    echo "PASS tests/kubernetes/bad rejected with the expected problems"
else
    echo "FAIL tests/kubernetes/bad: exit $bad_rc, output differs from bad/expected.txt:"
    diff <(echo "$bad") "$HERE/bad/expected.txt"
    rc=1
fi
exit $rc
