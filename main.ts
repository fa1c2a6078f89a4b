/**
 * The llmgw binary's entry point (design §3): `deno run main.ts <role> …`, or a
 * compiled per-role binary whose role is embedded as the first argument.
 *
 * @module
 */
import { main } from "./cli/main.ts";

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
