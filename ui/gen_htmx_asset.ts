/**
 * Writes ui/htmx_asset.ts from the pinned npm package (`htmx.org` in
 * deno.json): the dashboard serves htmx from the code, so it needs no CDN and
 * works in the `deno bundle` outputs, where no node_modules exist to read.
 *
 * Run after changing the pin: `deno run -A ui/gen_htmx_asset.ts`.
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import { htmxPackageFile } from "./htmx_package.ts";

const { version, text } = await htmxPackageFile();
const out = fileURLToPath(new URL("./htmx_asset.ts", import.meta.url));
Deno.writeTextFileSync(
  out,
  `/**
 * htmx ${version}, \`dist/htmx.min.js\` of the npm package \`htmx.org@${version}\`
 * (BSD Zero Clause License, https://htmx.org), unchanged. Written by
 * ui/gen_htmx_asset.ts; htmx_asset_test.ts checks it equals the pinned package's file.
 *
 * @module
 */

/** The htmx version served. */
export const HTMX_VERSION = ${JSON.stringify(version)};

/** htmx.min.js, as published. */
export const HTMX_JS = ${JSON.stringify(text)};
`,
);
console.log(`wrote ${out}: htmx ${version}, ${text.length} characters`);
