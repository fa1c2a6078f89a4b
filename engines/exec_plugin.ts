/**
 * Third-party engines as executables (design §8, docs/plugins.md). A compiled
 * llmgw binary cannot import a module it was not built with, but it can run
 * a program: an executable named `llmgw-engine-<name>` in a plugin directory
 * speaks the JSON protocol of engines/plugin_sdk.ts. Any language works.
 *
 * @module
 */
import { z } from "zod";
import { CommandError, runCommand } from "../discovery/run_command.ts";
import { compareNatural } from "../text/natural_order.ts";
import { formatIssues, zodIssues } from "../validation/issues.ts";
import { apiKeyProblems } from "./api_key.ts";
import { finishShard } from "./prepare.ts";
import { OWNED_ENV } from "./shard_env.ts";
import { LOG_PHASES, PHASE_MARKS } from "./cold_start_phases.ts";
import {
  ENGINE_API_VERSION,
  type EngineApiKey,
  type ShardLaunch,
  type ShardSpec,
} from "./types.ts";
import type { Assert, Same } from "../protocol/same_type.ts";
import { errorMessage } from "../text/error_message.ts";

/** File names of engine plugins start with this; the rest is the engine name. */
export const EXEC_PLUGIN_PREFIX = "llmgw-engine-";

/** How long one plugin call may take, unless told otherwise. */
export const PLUGIN_TIMEOUT_MS = 10_000;

/** An engine llmgw can prepare shards with, built in or an executable. */
export interface EngineDriver {
  /** The engine name profiles use. */
  name: string;
  /** "builtin", or the plugin executable's path. */
  source: string;
  /** Quantizations it accepts. */
  quantizations: readonly string[];
  /** How to ask a host for the installed version (design §14). */
  version_command: readonly string[];
  /** How the engine takes its API key (design §11.2); absent when it takes none. */
  api_key?: EngineApiKey;
  /** Checks one shard and builds its command, environment and probes. */
  prepare(launch: ShardLaunch): Promise<ShardSpec>;
}

/** An environment variable name llmgw may set: not one of its GPU and NCCL variables. */
const ApiKeyEnvSchema = z.string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, "must be an environment variable name")
  .refine((n) => !OWNED_ENV.has(n) && !n.startsWith("LLMGW_"), "is a variable llmgw sets itself");

/** What a `describe` answer's `api_key` may be (docs/plugins.md). */
const API_KEY_FORMS =
  'must be {"env": VARIABLE}, {"flag": OPTION} or {"config_file": {"flag": OPTION, "field": KEY}}';

/** A long or short option, without a value: the key follows it as the next argument. */
const ApiKeyFlagSchema = z.string().regex(
  /^--?[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/,
  "must be an option like --api-key, without =value",
);

/** A key in the engine's YAML config file; llmgw writes it quoted, so YAML reads it as a string. */
const ApiKeyFieldSchema = z.string().regex(
  /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/,
  "must be a config file key like api-key",
);

const DescriptionSchema = z.object({
  api_version: z.literal(ENGINE_API_VERSION),
  name: z.string().regex(/^[a-z][a-z0-9_-]{0,62}$/),
  quantizations: z.array(z.string()).min(1),
  version_command: z.array(z.string()),
  api_key: z.union([
    z.object({ env: ApiKeyEnvSchema }).strict(),
    z.object({ flag: ApiKeyFlagSchema }).strict(),
    z.object({
      config_file: z.object({ flag: ApiKeyFlagSchema, field: ApiKeyFieldSchema }).strict(),
    }).strict(),
  ], API_KEY_FORMS).optional(),
});

const HttpCheckSchema = z.object({
  path: z.string().startsWith("/"),
  expect_status: z.number().int().min(100).max(599),
  lists_model: z.string().optional(),
}).strict();

const AnswerSchema = z.object({
  problems: z.array(z.string()),
  command: z.object({
    argv: z.array(z.string()).min(1),
    env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string()),
  }).nullable(),
  probes: z.object({
    serves_http: z.boolean(),
    liveness: z.array(HttpCheckSchema),
    readiness: z.array(HttpCheckSchema),
    loading_progress: z.array(z.object({ regex: z.string() })),
    // Optional: plugins written before receipts leave it out.
    cold_start_phases: z.array(z.object({
      phase: z.enum(LOG_PHASES),
      regex: z.string().max(1024),
      marks: z.enum(PHASE_MARKS),
    })).max(64).optional(),
  }).nullable(),
  metrics: z.object({
    running: z.array(z.string()),
    waiting: z.array(z.string()),
    kv_cache_usage: z.array(z.string()),
  }).nullable(),
});

// A plugin's answer is a shard spec without the key (its `describe` says that):
// `deno check` fails here when the two drift apart.
type _AnswerIsSpec = Assert<Same<z.output<typeof AnswerSchema>, Omit<ShardSpec, "api_key">>>;

/** Raised when a plugin executable cannot be used; the message names it and says why. */
export class EnginePluginError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "EnginePluginError";
  }
}

async function call(
  path: string,
  args: string[],
  timeoutMs: number,
  input?: string,
): Promise<unknown> {
  let out;
  try {
    out = await runCommand(path, args, {
      timeoutMs,
      maxOutputBytes: 1 << 20,
      input,
    });
  } catch (e) {
    throw new EnginePluginError(
      `${path} ${args[0]}: ${e instanceof CommandError ? e.message : String(e)}`,
    );
  }
  if (out.code !== 0) {
    const why = (out.stderr.trim() || out.stdout.trim()).split("\n").slice(-3).join(" / ").slice(
      0,
      300,
    );
    throw new EnginePluginError(
      `${path} ${args[0]} exited with code ${out.code}: ${why || "no output"}`,
    );
  }
  try {
    return JSON.parse(out.stdout);
  } catch {
    throw new EnginePluginError(
      `${path} ${args[0]} did not print JSON: ${out.stdout.slice(0, 120)}`,
    );
  }
}

/**
 * Loads one plugin executable: asks it to describe itself and checks that
 * the name matches the file name.
 *
 * @throws {EnginePluginError} Naming the file and what was wrong.
 */
export async function loadExecPlugin(
  path: string,
  timeoutMs = PLUGIN_TIMEOUT_MS,
): Promise<EngineDriver> {
  const file = path.split("/").pop()!;
  const described = DescriptionSchema.safeParse(await call(path, ["describe"], timeoutMs));
  if (!described.success) {
    throw new EnginePluginError(`${path} describe:\n${formatIssues(zodIssues(described.error))}`);
  }
  const d = described.data;
  if (`${EXEC_PLUGIN_PREFIX}${d.name}` !== file) {
    throw new EnginePluginError(
      `${path} says it is engine "${d.name}"; its file must be named ${EXEC_PLUGIN_PREFIX}${d.name}`,
    );
  }
  return {
    name: d.name,
    source: path,
    quantizations: d.quantizations,
    version_command: d.version_command,
    ...(d.api_key === undefined ? {} : { api_key: d.api_key }),
    async prepare(launch: ShardLaunch): Promise<ShardSpec> {
      let answer: ShardSpec;
      try {
        const parsed = AnswerSchema.safeParse(
          await call(path, ["shard"], timeoutMs, JSON.stringify(launch)),
        );
        if (!parsed.success) {
          throw new EnginePluginError(
            `${path} shard answered:\n${formatIssues(zodIssues(parsed.error))}`,
          );
        }
        answer = parsed.data;
      } catch (e) {
        answer = {
          problems: [`engine plugin ${d.name}: ${errorMessage(e)}`],
          command: null,
          probes: null,
          metrics: null,
        };
      }
      // A profile may not set the key llmgw gives the shard, whatever the plugin checks itself.
      if (d.api_key !== undefined) {
        const own = apiKeyProblems(d.name, launch.profile, { key: d.api_key })
          .filter((m) => !answer.problems.includes(m));
        answer = { ...answer, problems: [...answer.problems, ...own] };
      }
      // The same shared checks and NCCL environment as built-in engines (design §5.3).
      return finishShard(d.name, launch, d.quantizations, answer);
    },
  };
}

/**
 * Finds and loads every `llmgw-engine-*` executable in `dirs`. A plugin that
 * fails to load is a problem, not fatal: the others still load.
 */
export async function loadExecPlugins(
  dirs: readonly string[],
  timeoutMs = PLUGIN_TIMEOUT_MS,
): Promise<{ drivers: EngineDriver[]; problems: string[] }> {
  const drivers: EngineDriver[] = [];
  const problems: string[] = [];
  for (const dir of dirs) {
    const paths: string[] = [];
    try {
      for await (const e of Deno.readDir(dir)) {
        if (e.name.startsWith(EXEC_PLUGIN_PREFIX) && !e.isDirectory) paths.push(`${dir}/${e.name}`);
      }
    } catch (e) {
      problems.push(
        `engine plugin directory ${dir}: ${
          e instanceof Deno.errors.NotFound ? "does not exist" : String(e)
        }`,
      );
      continue;
    }
    for (const path of paths.sort(compareNatural)) {
      try {
        drivers.push(await loadExecPlugin(path, timeoutMs));
      } catch (e) {
        problems.push(errorMessage(e));
      }
    }
  }
  return { drivers, problems };
}
