#!/usr/bin/env bash
# Bundles each role's entry into dist/llmgw-<role>.js and runs it: the nearest
# offline stand-in for `deno compile` (which needs a downloaded runtime). The
# agent bundle must print the reviewed inventory of a recorded machine, with the
# same flags and the same least-privilege permissions the compiled binary gets.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/roles.sh
mkdir -p dist
for role in $ROLES; do
  deno bundle --quiet --platform deno -o "dist/llmgw-$role.js" "roles/$role.ts"
  echo "bundle: built dist/llmgw-$role.js"
done
# The admin CLI (llmgw tokens, nodes, apply, …), installed with the control role.
deno bundle --quiet --platform deno -o dist/llmgw.js main.ts
echo "bundle: built dist/llmgw.js"

machine=tests/fixtures/machines/dgx_h100_8x_nics
# shellcheck disable=SC2046
deno run $(perms_for agent) dist/llmgw-agent.js inventory --json \
  --nvidia-smi "$machine/nvidia-smi" --sysfs-root "$machine/sysfs" \
  --fabric ib-compute=mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11 \
  --fabric storage=mlx5_7,mlx5_8 >dist/inventory.json
deno eval --quiet '
  const [got, want] = Deno.args.map((p) => JSON.parse(Deno.readTextFileSync(p)));
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    console.error("bundle: agent inventory differs from the reviewed output");
    Deno.exit(1);
  }' dist/inventory.json "$machine/expected_inventory.json"
echo "bundle: dist/llmgw-agent.js inventory --json matches $machine"

# shellcheck disable=SC2046
deno run $(perms_for control) dist/llmgw-control.js --help >/dev/null 2>&1 || [ $? = 2 ]
# shellcheck disable=SC2046
deno run $(perms_for gateway) dist/llmgw-gateway.js --help >/dev/null 2>&1 || [ $? = 2 ]
echo "bundle: control and gateway bundles start"
