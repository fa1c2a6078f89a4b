#!/usr/bin/env bash
# One static binary per role into dist/ (design §3): dist/llmgw-agent, -control, -gateway.
# `deno compile` needs the denort runtime, which it downloads from Deno's own
# server unless DENORT_BIN points at a local copy. Where neither is possible
# this script says so plainly and exits 0 without claiming a build.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/roles.sh
if [ -z "${DENORT_BIN:-}" ] && [ "${LLMGW_COMPILE_ONLINE:-}" != 1 ]; then
  echo "compile: SKIPPED. deno compile needs the denort runtime: set DENORT_BIN=/path/to/denort" >&2
  echo "compile: (or LLMGW_COMPILE_ONLINE=1 where dl.deno.land is reachable). Nothing was built." >&2
  exit 0
fi
mkdir -p dist
for role in $ROLES; do
  # shellcheck disable=SC2046
  deno compile $(perms_for "$role") --unstable-no-legacy-abort \
    --output "dist/llmgw-$role" "roles/$role.ts"
  echo "compile: built dist/llmgw-$role"
done
