#!/usr/bin/env bash
# Checks the systemd units of deploy/systemd with `systemd-analyze verify`, as
# deploy/install.sh installs them: every role is installed into a temporary
# root, and the installed units are verified with ExecStart pointing into that
# root (verify checks that the program exists and is executable). Any output
# at all (an unknown or misspelled directive is only a warning to systemd)
# fails the check. Skips, exiting 0, only where systemd-analyze is absent;
# CI has it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/roles.sh

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "systemd_verify: SKIPPED: systemd-analyze not found (install systemd; CI has it)"
  exit 0
fi

tmp=$(mktemp -d)
mkdir "$tmp/root"
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086
if ! bash deploy/install.sh --root "$tmp/root" $ROLES >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2
  echo "systemd_verify: FAILED: deploy/install.sh --root could not install the roles" >&2
  exit 1
fi

mkdir "$tmp/units"
units=()
for role in $ROLES; do
  installed=$tmp/root/etc/systemd/system/llmgw-$role.service
  [ -f "$installed" ] || {
    echo "systemd_verify: FAILED: deploy/install.sh did not install $installed" >&2
    exit 1
  }
  grep -q '^ExecStart=/' "$installed" || {
    echo "systemd_verify: FAILED: llmgw-$role.service has no absolute ExecStart=" >&2
    exit 1
  }
  # The same file name (systemd derives the unit's name from it), its program in the temp root.
  sed "s#^ExecStart=/#ExecStart=$tmp/root/#" "$installed" >"$tmp/units/llmgw-$role.service"
  units+=("$tmp/units/llmgw-$role.service")
done

flags=(--man=no)
# Only the units given, not the host's units they pull in (systemd 250 and later).
if systemd-analyze verify --help 2>&1 | grep -q -- --recursive-errors; then
  flags+=(--recursive-errors=no)
fi
rc=0
out=$(systemd-analyze verify "${flags[@]}" "${units[@]}" 2>&1) || rc=$?
if [ $rc != 0 ] || [ -n "$out" ]; then
  printf '%s\n' "$out" | sed "s#$tmp/units/##g" >&2
  echo "systemd_verify: FAILED: systemd-analyze verify (exit $rc) on the units installed from deploy/systemd" >&2
  exit 1
fi
# shellcheck disable=SC2086
echo "systemd_verify: verified$(printf ' llmgw-%s.service' $ROLES) ($(systemd-analyze --version | head -1))"
