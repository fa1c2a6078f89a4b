/**
 * Entry point of the `llmgw-gateway` binary (design §3): the role is embedded as
 * the first argument, so `llmgw-gateway <command>` is `main.ts gateway <command>`.
 *
 * @module
 */
import { main } from "../cli/main.ts";

Deno.exit(await main(["gateway", ...Deno.args]));
