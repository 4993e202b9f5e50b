#!/bin/bash
# The man page agent/hostprep.8 (CTest: man_page_render, man_page_sync).
#
#   tests/agent/man_page_test.sh render PAGE
#     groff renders PAGE with every warning on (-ww) and prints nothing to stderr.
#     Exit 77 (CTest skip) when groff is not installed.
#
#   tests/agent/man_page_test.sh sync PAGE HOSTPREP
#     PAGE agrees with what the binary HOSTPREP prints:
#     - every command that 'hostprep --help' lists has its own .SS section, and every .SS section
#       under COMMANDS is a command;
#     - every long option of 'hostprep --help' and 'hostprep <command> --help' appears in PAGE;
#       a command's own options (its option table) appear in its .SS section;
#     - every option a .TP entry documents in a command's section (or in GLOBAL OPTIONS) is an
#       option the program has there.
#     The roff source is compared after '\-' -> '-' (and '\&', '\%', font escapes removed).
set -uo pipefail

usage() {
  echo "usage: $0 render PAGE | sync PAGE HOSTPREP" >&2
  exit 2
}

render() {
  local page=$1
  if ! command -v groff >/dev/null 2>&1; then
    echo "SKIP: groff is not installed (Debian: groff-base)"
    exit 77
  fi
  local err
  err=$(groff -man -ww -z -Tutf8 "$page" 2>&1 >/dev/null)
  local rc=$?
  if [[ $rc -ne 0 || -n $err ]]; then
    echo "FAIL: groff -man -ww -z -Tutf8 $page (exit $rc):"
    echo "$err"
    exit 1
  fi
  echo "ok: $page renders without warnings"
}

# Long options of a Boost option table in a --help text: "  --name arg ..." or "  -h [ --help ]".
table_options() {
  sed -nE -e 's/^  --([a-z0-9][a-z0-9-]*).*/--\1/p' -e 's/^  -[a-zA-Z] \[ --([a-z0-9][a-z0-9-]*) \].*/--\1/p'
}

# Every --name anywhere in a --help text (usage lines, descriptions, the table).
all_options() {
  grep -oE -- '--[a-z0-9][a-z0-9-]*' | sort -u
}

# The page's text between '.SS NAME' (or '.SH NAME') and the next .SS or .SH.
section() {
  local kind=$1 name=$2
  awk -v kind="$kind" -v name="$name" '
    /^\.S[SH]([ \t]|$)/ {
      t = $0; sub(/^\.S[SH][ \t]+/, "", t); gsub(/"/, "", t); sub(/[ \t]+$/, "", t)
      inside = ($1 == kind && t == name); next
    }
    inside { print }' "$norm"
}

# Long options that .TP entries document: the first --name on the line after each .TP.
documented_options() {
  awk '/^\.TP/ { getline; if (match($0, /--[a-z0-9][a-z0-9-]*/)) print substr($0, RSTART, RLENGTH) }' | sort -u
}

has_option() {  # has_option TEXT OPTION: OPTION as a whole word (--vgpu-config is not --vgpu-config-name)
  grep -qE -- "$2([^a-z0-9-]|\$)" <<<"$1"
}

sync() {
  local page=$1 bin=$2 failed=0
  [[ -r $page ]] || { echo "FAIL: cannot read $page"; exit 1; }
  [[ -x $bin ]] || { echo "FAIL: $bin is not an executable"; exit 1; }
  norm=$(mktemp)
  trap 'rm -f "$norm"' EXIT
  sed -E -e 's/\\-/-/g' -e 's/\\[&%]//g' -e 's/\\f[BIRP]//g' -e 's/\\f\[[A-Z]*\]//g' "$page" >"$norm"
  local whole
  whole=$(<"$norm")

  local top
  top=$("$bin" --help) || { echo "FAIL: $bin --help exited $?"; exit 1; }
  local commands
  commands=$(awk '/^Commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }' <<<"$top")
  if [[ -z $commands ]]; then
    echo "FAIL: no commands found in '$bin --help'"
    exit 1
  fi

  # check_table HELP SECTION WHERE WHAT: every option HELP prints is somewhere in the page, every
  # option of its table is in SECTION (called WHERE), and SECTION documents none it lacks.
  check_table() {
    local help=$1 sec=$2 where=$3 what=$4 own opt
    for opt in $(all_options <<<"$help"); do
      has_option "$whole" "$opt" || { echo "FAIL: $opt ($what) is not in the man page"; failed=1; }
    done
    own=$(table_options <<<"$help")
    [[ -n $own ]] || { echo "FAIL: no option table in '$what'"; failed=1; }
    for opt in $own; do
      # --help of a command is said once for all, at the top of COMMANDS.
      [[ $opt == --help && $where != "GLOBAL OPTIONS" ]] && continue
      has_option "$sec" "$opt" || { echo "FAIL: $opt of '$what' is not in the $where section"; failed=1; }
    done
    for opt in $(documented_options <<<"$sec"); do
      grep -qxF -- "$opt" <<<"$own" || { echo "FAIL: the $where section documents $opt, which '$what' does not list"; failed=1; }
    done
  }

  # Global options, then each command: its section and its options.
  local gsec
  gsec=$(section .SH "GLOBAL OPTIONS")
  [[ -n $gsec ]] || { echo "FAIL: no GLOBAL OPTIONS section"; failed=1; }
  check_table "$top" "$gsec" "GLOBAL OPTIONS" "hostprep --help"
  local cmd help sec
  for cmd in $commands; do
    if ! help=$("$bin" "$cmd" --help); then
      echo "FAIL: $bin $cmd --help failed"
      failed=1
      continue
    fi
    sec=$(section .SS "$cmd")
    [[ -n $sec ]] || { echo "FAIL: command $cmd has no '.SS $cmd' section"; failed=1; }
    check_table "$help" "$sec" "'.SS $cmd'" "hostprep $cmd --help"
  done

  # No section under COMMANDS for a command the program does not have.
  local ss
  while IFS= read -r ss; do
    [[ -z $ss ]] && continue
    grep -qxF -- "$ss" <<<"$commands" || { echo "FAIL: '.SS $ss' under COMMANDS is not a command of 'hostprep --help'"; failed=1; }
  done < <(awk '/^\.SH/ { on = ($0 ~ /^\.SH[ \t]+"?COMMANDS"?[ \t]*$/); next }
                on && /^\.SS/ { t = $0; sub(/^\.SS[ \t]+/, "", t); gsub(/"/, "", t); print t }' "$norm")

  if [[ $failed -ne 0 ]]; then
    echo "the man page $page is out of step with $bin: update it"
    exit 1
  fi
  echo "ok: $page documents every command and option of $bin ($(wc -w <<<"$commands") commands)"
}

case ${1:-} in
  render) [[ $# -eq 2 ]] || usage; render "$2" ;;
  sync) [[ $# -eq 3 ]] || usage; sync "$2" "$3" ;;
  *) usage ;;
esac
