/**
 * The llmgw FAKE ENGINE: test and demo tooling that stands in for vLLM and
 * SGLang on machines without GPUs (design §1.4). It is not a mode of the real
 * engine plugins and never touches a GPU.
 *
 * ```sh
 * deno run -A dev/fake_engine/fake_engine.ts vllm serve MODEL --served-model-name N --port P …
 * deno run -A dev/fake_engine/fake_engine.ts sglang --model-path M --served-model-name N --port P …
 * ```
 *
 * The shims in `dev/fake_engine/bin/` (`vllm`, `python3 -m sglang.launch_server`)
 * run it with exactly the argv the plugins build. The argv must stay the real
 * engine's; behaviour is tuned with `FAKE_ENGINE_*` environment variables
 * (see dev/fake_engine/README.md and {@link readKnobs}).
 *
 * What it imitates (engine reference §1.4, §1.5, §2.2-2.4, §5):
 * - argparse: unknown flags, missing values, bad ints and choices exit 2 with
 *   an argparse-style message on stderr; SGLang also takes unambiguous prefixes
 *   (`--tp` for `--tp-size`), vLLM takes `--flag_name` for `--flag-name`.
 * - vLLM: the port stays closed while "loading" (tqdm progress bars on
 *   stderr), then opens; headless ranks never listen.
 * - SGLang rank 0: listens at once, `/health` 503 until loaded and warm, then
 *   200; `/v1/models` 200 from the start. Ranks ≥ 1: a dummy health server once
 *   loaded.
 * - The OpenAI surface (`/v1/models`, chat and text completions with SSE
 *   streaming, `n` choices and `stream_options.include_usage`, embeddings;
 *   vLLM's `/v1/responses`, plain and streamed) and `/metrics` with the
 *   engines' real metric names.
 * - API keys as each engine takes and checks them (engine reference §6):
 *   vLLM's `--api-key` or `VLLM_API_KEY` on `/v1`, `/v2`, `/inference` and
 *   `/cohere`; SGLang's `--api-key`, on the command line or in its
 *   `--config` YAML file (≥ 0.5.3, as strictly as SGLang), on everything but
 *   `/health*`, `/ready*` and `/metrics*`. The key never appears in the
 *   fake's output.
 * - A worker child in the same process group that outlives a SIGKILLed leader,
 *   as vLLM's EngineCore and SGLang's schedulers do.
 * - Optionally (off by default), a prefix cache, a time to first token that
 *   grows with the uncached part of the prompt, and the engines' cache
 *   counters: dev/fake_engine/fake_prefix_cache.ts.
 *
 * This file is the entry: it reads the argv and the knobs and hands over to
 * {@link serve}. The parts, one concept a file, are its `fake_engine_*.ts`
 * siblings: argparse (`_argparse`, `_flags`, `_command`, with SGLang's
 * `--config` file in `_config_file` and refusals in `_config_error`), the knobs
 * (`_knobs`), the log (`_log`), loading (`_loading`), the lifecycle
 * (`_serve`, `_startup`, `_worker`, `_crash`), and the HTTP surface
 * (`_uvicorn`, `_routes`, `_auth`, `_http`, `_completions`, `_responses`,
 * `_embeddings`, `_sse`, `_metrics`, with `_runtime`, `_scheduler` and
 * `_generation` behind them). They import only each other,
 * fake_prefix_cache.ts and fake_load_metrics.ts (which import nothing but
 * each other), llmgw's pure model modules (README) and Deno's built-in
 * `node:http`, so it runs from any working directory without a deno.json or
 * network access (`--no-config`).
 *
 * @module
 */

import {
  DEFAULT_BLOCK_TOKENS,
  PrefixCacheKnobError,
  type PrefixCacheKnobs,
  readPrefixCacheKnobs,
} from "./fake_prefix_cache.ts";
import { type FlagValue, UsageError } from "./fake_engine_argparse.ts";
import { type Command, ConfigError, flagInt, parseCommandLine } from "./fake_engine_command.ts";
import {
  envGet,
  type KeepAlive,
  KnobError,
  type Knobs,
  readKeepAlive,
  readKnobs,
} from "./fake_engine_knobs.ts";
import { writeAll } from "./fake_engine_log.ts";
import { FakeConfigFileError } from "./fake_engine_config_file.ts";
import { serve } from "./fake_engine_serve.ts";
import { runWorker } from "./fake_engine_worker.ts";

/**
 * The prefix-cache knobs with the engine's own flags: vLLM's `--block-size`
 * sets the block size FAKE_ENGINE_BLOCK_TOKENS overrides, and vLLM's
 * `--no-enable-prefix-caching` or SGLang's `--disable-radix-cache` turns the
 * cache off.
 */
function prefixKnobs(command: Command): PrefixCacheKnobs {
  const flags = command.kind === "serve" ? command.config.flags : new Map<string, FlagValue>();
  const blockTokens = flagInt(flags, "--block-size", DEFAULT_BLOCK_TOKENS);
  if (!Number.isSafeInteger(blockTokens) || blockTokens < 1) {
    throw new ConfigError(`--block-size must be a whole number ≥ 1, got ${blockTokens}`);
  }
  const knobs = readPrefixCacheKnobs(envGet, { blockTokens });
  const off = flags.get("--enable-prefix-caching") === false ||
    flags.get("--disable-radix-cache") === true;
  return off ? { ...knobs, cache: null } : knobs;
}

/** Entry point: `fake_engine.ts <vllm|sglang> ARGS…` or `fake_engine.ts --worker ENGINE LEADER_PID`. */
export async function main(args: string[]): Promise<void> {
  if (args[0] === "--worker") {
    runWorker(args.slice(1));
    return;
  }
  let command: Command;
  let knobs: Knobs;
  let prefix: PrefixCacheKnobs;
  let keepAlive: KeepAlive | null;
  try {
    command = parseCommandLine(args);
    knobs = readKnobs();
    prefix = prefixKnobs(command);
    keepAlive = command.kind === "serve" ? readKeepAlive(command.config.engine) : null;
  } catch (e) {
    if (e instanceof UsageError) {
      writeAll(Deno.stderr, e.render());
      Deno.exit(2);
    }
    if (
      e instanceof KnobError || e instanceof PrefixCacheKnobError ||
      e instanceof FakeConfigFileError
    ) {
      writeAll(Deno.stderr, `fake_engine.ts: error: ${e.message}\n`);
      Deno.exit(2);
    }
    if (e instanceof ConfigError) {
      writeAll(Deno.stderr, e.render());
      Deno.exit(1);
    }
    throw e;
  }
  if (command.kind === "print") {
    writeAll(Deno.stdout, command.text);
    return;
  }
  await serve(command.config, knobs, prefix, keepAlive!);
}

if (import.meta.main) {
  await main(Deno.args);
}
