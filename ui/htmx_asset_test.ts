import { createHash } from "node:crypto";
// Type-only: puts the pinned package in the module graph, so Deno fetches it for this test.
import type {} from "htmx.org";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { HTMX_JS, HTMX_VERSION } from "./htmx_asset.ts";
import { htmxPackageFile } from "./htmx_package.ts";

const sha256 = (t: string) => createHash("sha256").update(t).digest("hex");

Deno.test("htmx asset: the served copy is the pinned package's dist/htmx.min.js, byte for byte", async () => {
  const pkg = await htmxPackageFile();
  assertEquals(HTMX_VERSION, pkg.version);
  assertEquals(sha256(HTMX_JS), sha256(pkg.text));
});

Deno.test("htmx asset: the pin is htmx 2.0.x (npm's latest is another major)", () => {
  assertOk(/^2\.0\.\d+$/.test(HTMX_VERSION), HTMX_VERSION);
  const config = JSON.parse(
    Deno.readTextFileSync(new URL("../deno.json", import.meta.url)),
  );
  assertEquals(config.imports["htmx.org"], `npm:htmx.org@${HTMX_VERSION}`);
});
