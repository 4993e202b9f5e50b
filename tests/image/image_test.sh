#!/bin/bash
# The container image (systemd/image/build-image.sh), checked as an OCI image archive and run by a
# real OCI runtime (crun). CTest: image.archive (label unit).
#
#   tests/image/image_test.sh --binary BUILD/hostprep --fixture-tool BUILD/tests/image/fixture_tree
#       --fixtures tests/fixtures -- BUILD_IMAGE_SCRIPT_ARGS...   (everything after -- is passed
#       to build-image.sh: --version, --name, --source, --license, --source-dir)
#
# 1. reproducible: two builds (into different directories, the second from a copy of the binary
#    with another mtime) give byte-identical archives, so the same manifest digest;
# 2. the layout (OCI image spec image-layout.md): oci-layout, index.json -> manifest -> config and
#    layer, every blob's sha256 is its name and every descriptor's size its size, the media types,
#    the config's diff_id is the sha256 of the uncompressed layer; `skopeo inspect` reads it too
#    where skopeo is installed (an independent reader);
# 3. the labels: org.opencontainers.image.{version,revision,source,licenses,created} as asked;
# 4. the layer: uid/gid 0 and the one mtime on every entry, the binary, every library ldd lists;
# 5. it runs: crun runs the image's entrypoint with --version and --help (the same text as the
#    binary prints outside), "hostprep --version" by PATH as the DaemonSets' command does, and
#    `hostprep --root /host status --output json` on a fixture host tree mounted read-only at
#    /host (the same document as the binary prints on that tree outside; status only reads).
#    The container gets its own namespaces (pid, mount, network, ipc, uts) and a read-only root.
# Exit 0 pass, 1 fail, 77 skip (crun missing or not root: it needs both).
set -euo pipefail
BINARY= TOOL= FIXTURES=
while [ $# -gt 0 ]; do
    case $1 in
        --binary) BINARY=$2; shift 2 ;;
        --fixture-tool) TOOL=$2; shift 2 ;;
        --fixtures) FIXTURES=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "image_test: unknown argument $1" >&2; exit 2 ;;
    esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_IMAGE=$HERE/../../systemd/image/build-image.sh
BUILD_ARGS=("$@")
arg() { # the value of build-image.sh option $1 in BUILD_ARGS
    local i; for ((i = 0; i < ${#BUILD_ARGS[@]} - 1; i++)); do
        [ "${BUILD_ARGS[i]}" = "$1" ] && { echo "${BUILD_ARGS[i + 1]}"; return; }
    done
}
T=$(mktemp -d "${TMPDIR:-/tmp}/hostprep-image-test.XXXXXX")
cleanup() {
    [ -d "$T/state" ] && for c in $(ls "$T/state" 2>/dev/null); do crun --root "$T/state" delete -f "$c" >/dev/null 2>&1 || true; done
    rm -rf "$T"
}
trap cleanup EXIT
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; fails=$((fails + 1)); }
check() { # NAME COMMAND...: PASS when the command succeeds
    local name=$1; shift
    if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$out"; fi
}

# --- 1. two builds, one digest ------------------------------------------------------------------
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000}
d1=$("$BUILD_IMAGE" --binary "$BINARY" --out "$T/a/image.tar" --work "$T/a/work" "${BUILD_ARGS[@]}")
cp "$BINARY" "$T/hostprep-copy"; touch -d '2001-02-03 04:05:06' "$T/hostprep-copy"
d2=$("$BUILD_IMAGE" --binary "$T/hostprep-copy" --out "$T/b/image.tar" --work "$T/b/work" "${BUILD_ARGS[@]}")
echo "manifest digest $d1, archive $(stat -c %s "$T/a/image.tar") bytes"
if [ "$d1" = "$d2" ] && cmp -s "$T/a/image.tar" "$T/b/image.tar"; then
    pass image.reproducible
else
    fail image.reproducible "two builds differ: $d1 vs $d2, archives $(sha256sum "$T/a/image.tar" "$T/b/image.tar" | cut -c1-16 | tr '\n' ' ')"
fi

# --- 2. the layout ------------------------------------------------------------------------------
L=$T/layout; mkdir -p "$L"
tar -C "$L" -xf "$T/a/image.tar"
layout_ok() {
    local why=
    [ "$(jq -r .imageLayoutVersion "$L/oci-layout")" = 1.0.0 ] || why+=" oci-layout"
    [ "$(jq -r '.schemaVersion, .mediaType' "$L/index.json" | tr '\n' ' ')" = "2 application/vnd.oci.image.index.v1+json " ] || why+=" index.json header"
    [ "$(jq '.manifests | length' "$L/index.json")" = 1 ] || why+=" index.json: not one manifest"
    # Every blob is named by its sha256.
    for b in "$L"/blobs/sha256/*; do
        [ "$(sha256sum "$b" | cut -d' ' -f1)" = "${b##*/}" ] || why+=" blob ${b##*/}: wrong sha256"
    done
    # Every descriptor (index -> manifest -> config, layers) points at a blob of its size.
    desc() { # JSON-descriptor-file jq-path
        local d s; d=$(jq -r "$2.digest" "$1"); s=$(jq -r "$2.size" "$1")
        local f=$L/blobs/sha256/${d#sha256:}
        [ -f "$f" ] && [ "$(stat -c %s "$f")" = "$s" ] || { why+=" descriptor $2 in ${1##*/}: $d size $s"; return 1; }
        echo "$f"
    }
    local m c l
    m=$(desc "$L/index.json" '.manifests[0]') || { echo "$why"; return 1; }
    [ "$d1" = "$(jq -r '.manifests[0].digest' "$L/index.json")" ] || why+=" printed digest is not the index's"
    [ "$(jq -r '.manifests[0].mediaType' "$L/index.json")" = application/vnd.oci.image.manifest.v1+json ] || why+=" index media type"
    [ "$(jq -r '.schemaVersion, .mediaType, .config.mediaType, (.layers | length), .layers[0].mediaType' "$m" | tr '\n' ' ')" \
        = "2 application/vnd.oci.image.manifest.v1+json application/vnd.oci.image.config.v1+json 1 application/vnd.oci.image.layer.v1.tar+gzip " ] \
        || why+=" manifest media types"
    c=$(desc "$m" .config) && l=$(desc "$m" '.layers[0]') || { echo "$why"; return 1; }
    [ "$(jq -r '.rootfs.type, .rootfs.diff_ids[0]' "$c" | tr '\n' ' ')" = "layers sha256:$(gzip -dc "$l" | sha256sum | cut -d' ' -f1) " ] \
        || why+=" config diff_id is not the uncompressed layer's sha256"
    [ "$(jq -r '.os, .architecture' "$c" | tr '\n' ' ')" = "$(jq -r '.manifests[0].platform | .os, .architecture' "$L/index.json" | tr '\n' ' ')" ] \
        || why+=" platform of index and config differ"
    [ -z "$why" ] || { echo "$why"; return 1; }
    echo "$c" > "$T/config-path"; echo "$l" > "$T/layer-path"
}
check image.layout layout_ok
CONFIG=$(cat "$T/config-path" 2>/dev/null || true)
LAYER=$(cat "$T/layer-path" 2>/dev/null || true)
[ -n "$CONFIG" ] || { echo "1 passed, $((fails)) failed (no layout: stopping)"; exit 1; }
if command -v skopeo >/dev/null; then
    check image.skopeo_inspect sh -c "skopeo inspect --config oci-archive:'$T/a/image.tar' >'$T/skopeo.json' && jq -e --arg d '$(jq -r .rootfs.diff_ids[0] "$CONFIG")' '.rootfs.diff_ids[0] == \$d' '$T/skopeo.json'"
else
    echo "NOTE skopeo not installed: the layout is checked by this script only"
fi

# --- 3. labels ------------------------------------------------------------------------------------
labels_ok() {
    local want_rev=unknown src; src=$(arg --source-dir)
    [ -n "$src" ] && git -C "$src" rev-parse -q --verify HEAD >/dev/null 2>&1 && want_rev=$(git -C "$src" rev-parse HEAD)
    local created; created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
    jq -e --arg v "$(arg --version)" --arg r "$want_rev" --arg s "$(arg --source)" \
          --arg l "$(arg --license)" --arg c "$created" '
        .config.Labels as $L
        | $L["org.opencontainers.image.version"] == $v and $L["org.opencontainers.image.revision"] == $r
          and $L["org.opencontainers.image.source"] == $s and $L["org.opencontainers.image.licenses"] == $l
          and $L["org.opencontainers.image.created"] == $c and .created == $c
          and $v != "" and $s != "" and $l != ""' "$CONFIG" >/dev/null \
        || { jq -c .config.Labels "$CONFIG"; return 1; }
}
check image.labels labels_ok

# --- 4. the layer ---------------------------------------------------------------------------------
R=$T/rootfs; mkdir -p "$R"
tar -C "$R" --numeric-owner -xzf "$LAYER"
layer_ok() {
    local bad
    bad=$(tar --numeric-owner --full-time -tvzf "$LAYER" | awk '$2 != "0/0" { print "owner: " $0 }')
    [ -z "$bad" ] || { echo "$bad"; return 1; }
    bad=$(TZ=UTC tar --numeric-owner --full-time -tvzf "$LAYER" | awk -v t="$(date -u -d "@$SOURCE_DATE_EPOCH" '+%Y-%m-%d %H:%M:%S')" '$4 " " $5 != t { print "mtime: " $0 }')
    [ -z "$bad" ] || { echo "$bad"; return 1; }
    [ -x "$R/usr/sbin/hostprep" ] || { echo "no /usr/sbin/hostprep"; return 1; }
    local lib
    for lib in $(ldd "$BINARY" | sed -n -e 's/^.*=> \(\/[^ ]*\) (0x.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p'); do
        [ -e "$R$lib" ] || { echo "ldd lists $lib, not in the image"; return 1; }
    done
    # libkmod and libsystemd are opened with dlopen (drivers/seam/kmod.cpp, agent/service_notify.cpp),
    # so ldd does not list them: the image has them, under the names dlopen looks for, or every
    # module lookup in the container finds nothing and an agent under systemd never says READY.
    for lib in libkmod.so.2 libsystemd.so.0; do
        [ -n "$(find "$R/usr/lib" -name "$lib" 2>/dev/null)" ] || { echo "no $lib in the image"; return 1; }
    done
}
check image.layer layer_ok
echo "NOTE image: $(stat -c %s "$T/a/image.tar") bytes archive, layer $(stat -c %s "$LAYER") bytes compressed, $(du -sb "$R" | cut -f1) bytes unpacked"

# --- 5. crun runs it --------------------------------------------------------------------------------
if ! command -v crun >/dev/null || [ "$(id -u)" != 0 ]; then
    echo "NOTE crun missing or not root: the run checks are skipped"
    echo "$fails failed"; [ $fails = 0 ] && exit 77 || exit 1
fi
"$TOOL" "$FIXTURES/status-passthrough-done" "$T/host"
mkdir -p "$T/state"
# A machine with cgroup v1 plus a cgroup2 mount that has controllers ("hybrid") is refused by crun
# at start-up; such a machine runs the container in a private mount namespace with the cgroup2
# mount hidden (nothing outside that namespace changes).
hybrid=0
if [ -d /sys/fs/cgroup/unified ] && [ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ] \
        && [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]; then
    hybrid=1
fi
n=0
run_image() { # ARGS...: the process args (as Kubernetes' command), stdout/stderr of the container
    n=$((n + 1))
    local B=$T/bundle-$n
    mkdir -p "$B"
    (cd "$B" && crun spec)
    jq --arg root "$R" --arg host "$T/host" --argjson env "$(jq -c .config.Env "$CONFIG")" \
       --argjson args "$(printf '%s\n' "$@" | jq -R . | jq -sc .)" \
       '.root = {path: $root, readonly: true}
        | .process.args = $args | .process.terminal = false | .process.env = $env
        | .mounts += [{destination: "/host", type: "bind", source: $host, options: ["rbind", "ro"]}]' \
       < "$B/config.json" > "$B/config.json.new"
    mv "$B/config.json.new" "$B/config.json"
    if [ $hybrid = 1 ]; then
        unshare -m --propagation private sh -c 'mount -t tmpfs none /sys/fs/cgroup/unified && exec crun --root "$1" run --bundle "$2" "$3"' \
            sh "$T/state" "$B" "hostprep-image-test-$$-$n"
    else
        crun --root "$T/state" run --bundle "$B" "hostprep-image-test-$$-$n"
    fi
}
entry=$(jq -r '.config.Entrypoint[]' "$CONFIG")
same() { # NAME WANT-FILE GOT-FILE RC
    if [ "$4" = 0 ] && cmp -s "$2" "$3"; then pass "$1"
    else fail "$1" "exit $4; $(diff "$2" "$3" | head -n 20)"; fi
}
rc=0; run_image "$entry" --version > "$T/v.got" 2>&1 || rc=$?
"$BINARY" --version > "$T/v.want"; same image.runs_version "$T/v.want" "$T/v.got" $rc
rc=0; run_image "$entry" --help > "$T/h.got" 2>&1 || rc=$?
"$BINARY" --help > "$T/h.want"; same image.runs_help "$T/h.want" "$T/h.got" $rc
rc=0; run_image hostprep --version > "$T/p.got" 2>&1 || rc=$?      # by PATH, as the DaemonSets do
same image.runs_by_path "$T/v.want" "$T/p.got" $rc
rc=0; run_image "$entry" --root /host status --output json > "$T/s.got" 2>"$T/s.err" || rc=$?
"$BINARY" --root "$T/host" status --output json > "$T/s.want"
# The same document but for the time stamps (observedTime, lastTransitionTime: now).
untimed() { jq -S 'walk(if type == "object" then with_entries(select(.key | test("Time$") | not)) else . end)' "$1" > "$1.untimed"; }
untimed "$T/s.want"; untimed "$T/s.got" 2>/dev/null || true
if [ $rc = 0 ] && jq -e '.actualMode == "vm-passthrough"' "$T/s.got" >/dev/null; then
    same image.runs_status "$T/s.want.untimed" "$T/s.got.untimed" $rc
else
    fail image.runs_status "exit $rc: $(head -c 600 "$T/s.err" "$T/s.got")"
fi
echo "$fails failed"
[ $fails = 0 ]
