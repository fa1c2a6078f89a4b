/**
 * Entry point of the `llmgw-control` binary (design §3): the role is embedded as
 * the first argument, so `llmgw-control <command>` is `main.ts control <command>`.
 *
 * @module
 */
import { main } from "../cli/main.ts";

Deno.exit(await main(["control", ...Deno.args]));
