/**
 * Entry point of the `llmgw-agent` binary (design §3): the role is embedded as
 * the first argument, so `llmgw-agent <command>` is `main.ts agent <command>`.
 *
 * @module
 */
import { main } from "../cli/main.ts";

Deno.exit(await main(["agent", ...Deno.args]));
