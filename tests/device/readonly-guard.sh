# Sourced by readonly.sh: which hostprep command lines may run on a real host during a
# read-only check. writes_to_host ARGS... succeeds (0) when the command could write to the host.
writes_to_host() {
  local cmd=$1; shift
  case $cmd in
    --version|preflight|check-node) return 1 ;;
    status) for a in "$@"; do case $a in --write|--write=*) return 0 ;; esac; done; return 1 ;;
    prepare) for a in "$@"; do [ "$a" = --dry-run ] && return 1; done; return 0 ;;
    *) return 0 ;;  # agent, persist and anything new: assume it writes
  esac
}

