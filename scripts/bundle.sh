#!/usr/bin/env bash
# Bundles each role's entry into dist/llmgw-<role>.js and smoke-runs it: the
# nearest offline stand-in for `deno compile` (which needs a downloaded runtime).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/roles.sh
mkdir -p dist
for role in $ROLES; do
  deno bundle --quiet --platform deno -o "dist/llmgw-$role.js" "roles/$role.ts"
  # shellcheck disable=SC2046
  deno run $(perms_for "$role") "dist/llmgw-$role.js" --help >/dev/null 2>&1 || {
    rc=$?
    # Roles without commands answer usage errors (2); anything else is a broken bundle.
    [ "$rc" = 2 ] || { echo "bundle: dist/llmgw-$role.js failed to run (exit $rc)" >&2; exit 1; }
  }
  echo "bundle: dist/llmgw-$role.js runs"
done
