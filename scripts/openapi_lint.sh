#!/usr/bin/env bash
# Lints the control plane's OpenAPI document with Redocly's recommended rules:
# any error fails (warnings are printed). Needs Node.js and npm (npx).
set -euo pipefail
cd "$(dirname "$0")/.."
REDOCLY_VERSION=2.77.0
doc="$(mktemp -d)/openapi.json"
trap 'rm -rf "$(dirname "$doc")"' EXIT
deno run --allow-all scripts/openapi.ts > "$doc"
npx -y "@redocly/cli@$REDOCLY_VERSION" lint "$doc"
