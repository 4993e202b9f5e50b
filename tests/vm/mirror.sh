# shellcheck shell=bash
# Sourced by fetch.sh and build-kbuild-root.sh.
# debian_mirror: the Debian archive this machine's apt already uses (the site of its own release's
# Packages index, as `apt-get indextargets` reports it), so a second suite such as trixie comes
# from the same place; HOSTPREP_VM_MIRROR overrides it; http://deb.debian.org/debian when apt
# names none (not a Debian machine, or no sources).
debian_mirror() {
    local codename site=
    if [ -n "${HOSTPREP_VM_MIRROR:-}" ]; then
        echo "$HOSTPREP_VM_MIRROR"; return
    fi
    codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
    if [ -n "$codename" ] && command -v apt-get >/dev/null; then
        # shellcheck disable=SC2016  # $(SITE) is apt's field name, not a substitution
        site=$(apt-get indextargets --format '$(SITE)' "Release: $codename" 'Created-By: Packages' \
                   2>/dev/null | head -n1)
    fi
    echo "${site:-http://deb.debian.org/debian}"
}
