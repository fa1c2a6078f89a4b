/**
 * The admin CLI (design §3, §13): `get`, `describe`, `explain`, `logs`,
 * `apply`, `scale`, `delete`, `rollout`, `cordon|uncordon|drain`, `events`,
 * `apikeys`, `tokens`. It talks to the control plane's admin API; the URL and
 * token come from `--url`/`--token-file` or `LLMGW_URL`/`LLMGW_TOKEN` (prefer
 * the environment or a file: flags show in `ps`). Every command takes
 * `--help` and `--json` (mutations print the object they changed).
 *
 * @module
 */
import type { z } from "zod";
import {
  ScaleAnswer,
  ShardLogsAnswer,
  StoredDeploymentSchema,
} from "../protocol/admin_protocol.ts";
import { adminAnswer, type AdminCall, adminRequest, openAdminTarget } from "./admin_client.ts";
import { adminHelp } from "./admin_help.ts";
import { advanceLog } from "../protocol/log_window.ts";
import { PROBE_PATHS, probeLinesNote } from "../supervisor/probe_lines.ts";
import { applyCommand } from "./apply_command.ts";
import { deleteCommand, deleteTarget } from "./delete_command.ts";
import { describeCommand } from "./describe_command.ts";
import { explainCommand } from "./explain_command.ts";
import { durationMs } from "./duration.ts";
import { GET_KINDS, getCommand } from "./get_command.ts";
import { refuseExtra } from "./names.ts";
import { nodeIntentCommand } from "./node_commands.ts";
import { type OutputFormat, outputFormat } from "./output_format.ts";
import { watchArgs } from "./rollout_watch.ts";
import { apiKeysCommand, tokensCommand } from "./key_commands.ts";
import { ROLLOUT_USAGE, rolloutCommand } from "./rollout_command.ts";
import { modelsCommand, modelsUsage } from "./models_command.ts";
import { parseFlags, UsageError } from "./usage_error.ts";

export { AdminError } from "./admin_client.ts";
export { ADMIN_USAGE } from "./admin_help.ts";

/** Flags every admin command takes. */
const COMMON = {
  url: { type: "string" },
  token: { type: "string" },
  "token-file": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

/** Each command's own flags, beside {@link COMMON}. */
const FLAGS = {
  nodes: { output: { type: "string", short: "o" } },
  get: {
    output: { type: "string", short: "o" },
    limit: { type: "string" },
    incarnation: { type: "string" },
  },
  describe: {},
  explain: {},
  logs: {
    follow: { type: "boolean", short: "f" },
    shard: { type: "string" },
    lines: { type: "string" },
    interval: { type: "string" },
  },
  apply: { file: { type: "string", short: "f", multiple: true }, "dry-run": { type: "boolean" } },
  scale: {},
  delete: {},
  cordon: {},
  uncordon: {},
  drain: { timeout: { type: "string" } },
  events: { limit: { type: "string" }, incarnation: { type: "string" } },
  apikeys: { models: { type: "string" } },
  tokens: { ttl: { type: "string" }, description: { type: "string" } },
  rollout: {
    "to-revision": { type: "string" },
    watch: { type: "string" },
    timeout: { type: "string" },
  },
  models: { nodes: { type: "string" } },
} as const;

type Verb = keyof typeof FLAGS;

/** The admin verbs this module handles. */
export const ADMIN_VERBS: ReadonlySet<string> = new Set(Object.keys(FLAGS));

/** What a running command may be told from outside: tests stop `logs -f` with it. */
export interface AdminOptions {
  /** Ends a command that follows or waits (`logs -f`, `drain`, `rollout status`). */
  signal?: AbortSignal;
  /** Standard error, for each name of a list that failed (default: the process's). */
  err?: (t: string) => void;
  /** Between two reads of a command that waits (`drain`, `rollout status`). Default 1 s. */
  pollMs?: number;
}

/** Runs one admin verb; returns the exit code. */
export async function adminCommand(
  verb: string,
  args: string[],
  out: (t: string) => void,
  options: AdminOptions = {},
): Promise<number> {
  if (!ADMIN_VERBS.has(verb)) throw new UsageError(`unknown admin command "${verb}"`);
  const v = verb as Verb;
  const { values, positionals } = parseFlags(verb, v === "rollout" ? watchArgs(args) : args, {
    ...COMMON,
    ...FLAGS[v],
  });
  if (values.help) {
    // `rollout SUBCOMMAND --help` is the subcommand's own.
    if (v === "rollout" && positionals.length > 0) {
      return await rolloutCommand(() => Promise.resolve(null), [positionals[0], "--help"], out);
    }
    out(adminHelp(verb, { rollout: ROLLOUT_USAGE })!);
    return 0;
  }
  // Usage is checked before any connection is needed.
  const plan = checkUsage(v, positionals, values as Values);
  const { target, close } = openAdminTarget(verb, values);
  try {
    const call: AdminCall = (method, path, body) => adminRequest(target, method, path, body);
    return await run(v, plan, call, values as Values, out, options);
  } finally {
    close();
  }
}

interface Values {
  json?: boolean;
  output?: string;
  limit?: string;
  follow?: boolean;
  shard?: string;
  lines?: string;
  interval?: string;
  file?: string[];
  models?: string;
  ttl?: string;
  description?: string;
  "to-revision"?: string;
  "dry-run"?: boolean;
  incarnation?: string;
  timeout?: string;
  watch?: string;
  nodes?: string;
}

/** A command's arguments after the usage checks. */
interface Plan {
  positionals: string[];
  format: OutputFormat;
  json: boolean;
  /** `drain --timeout`, in ms; 0: no limit. */
  timeoutMs: number;
}

const DESCRIBE_KINDS = ["node", "deployment", "replica", "model"];

/** The positional each command needs, in order, as shown in its usage. */
const NEEDS: Partial<Record<Verb, string[]>> = {
  get: ["nodes, deployments, replicas, events or models"],
  describe: ["node, deployment, replica or model", "NAME"],
  explain: ["DEPLOYMENT or REPLICA"],
  logs: ["REPLICA"],
  scale: ["DEPLOYMENT", "N"],
  delete: ["DEPLOYMENT"],
  cordon: ["NODE"],
  uncordon: ["NODE"],
  drain: ["NODE"],
};

const WHOLE = /^\d+$/;

/**
 * Checks a command's arguments before anything is sent.
 *
 * @throws {UsageError} One line naming what is wrong and the fix.
 */
function checkUsage(verb: Verb, positionals: string[], values: Values): Plan {
  for (const [i, what] of (NEEDS[verb] ?? []).entries()) {
    if (positionals[i] === undefined) {
      throw new UsageError(`${verb}: ${what} is required`, verb);
    }
  }
  const format = outputFormat(verb, values.output, values.json === true);
  // Commands that take one name refuse the rest; the others take lists (cli/names.ts).
  const takes: Partial<Record<Verb, string[]>> = {
    logs: ["one REPLICA"],
    scale: ["one DEPLOYMENT", "N"],
    apply: [],
  };
  if (takes[verb] !== undefined) refuseExtra(verb, positionals, takes[verb]);
  const subject = ["one SUBJECT (node/ID, deployment/NAME, replica/ID)"];
  if (verb === "events") refuseExtra(verb, positionals, subject);
  if (verb === "get" && positionals[0] === "events") {
    refuseExtra("get events", positionals.slice(1), subject);
  }
  if (verb === "delete") deleteTarget(positionals);
  if (verb === "get" && !GET_KINDS.includes(positionals[0])) {
    throw new UsageError(
      `get: expected ${GET_KINDS.join(", ")}, got "${positionals[0]}"`,
      verb,
    );
  }
  if (verb === "describe" && !DESCRIBE_KINDS.includes(positionals[0].replace(/s$/, ""))) {
    throw new UsageError(
      `describe: expected node, deployment, replica or model, got "${positionals[0]}"`,
      verb,
    );
  }
  if (verb === "models") modelsUsage(positionals, values.nodes);
  if (verb === "scale" && !WHOLE.test(positionals[1])) {
    throw new UsageError(`scale: N must be a whole number, got "${positionals[1]}"`, verb);
  }
  for (const flag of ["limit", "shard", "lines", "interval", "to-revision"] as const) {
    const value = values[flag];
    if (value !== undefined && !WHOLE.test(value)) {
      throw new UsageError(`${verb}: --${flag} must be a whole number, got "${value}"`, verb);
    }
  }
  if (verb === "apply" && (values.file ?? []).length === 0) {
    throw new UsageError("apply: -f FILE|DIR|- is required", verb);
  }
  const timeoutMs = values.timeout === undefined ? 0 : durationMs(values.timeout);
  if (timeoutMs === null) {
    throw new UsageError(
      `${verb}: --timeout must be a duration such as 90s, 10m or 1h, got "${values.timeout}"`,
      verb,
    );
  }
  return { positionals, format, json: format === "json", timeoutMs };
}

async function run(
  verb: Verb,
  plan: Plan,
  call: AdminCall,
  values: Values,
  out: (t: string) => void,
  options: AdminOptions,
): Promise<number> {
  const [first, second] = plan.positionals;
  const print = (json: unknown, text: () => string) =>
    out(plan.json ? JSON.stringify(json, null, 2) + "\n" : text().replace(/\n?$/, "\n"));
  const err = options.err ?? ((t: string) => Deno.stderr.writeSync(new TextEncoder().encode(t)));
  const wait = {
    intervalMs: options.pollMs ?? 1_000,
    timeoutMs: plan.timeoutMs,
    signal: options.signal,
  };
  const getOptions = {
    format: plan.format,
    limit: values.limit,
    incarnation: values.incarnation,
    out,
    err,
  };
  switch (verb) {
    case "nodes":
      return await getCommand(call, "nodes", plan.positionals, getOptions);
    case "events":
      return await getCommand(call, "events", plan.positionals, getOptions);
    case "get":
      return await getCommand(call, first, plan.positionals.slice(1), getOptions);
    case "describe":
      return await describeCommand(call, first, plan.positionals.slice(1), plan.json, out, err);
    case "explain":
      return await explainCommand(call, plan.positionals, plan.json, out, err);
    case "logs":
      return await logs(call, first, values, plan, out, options.signal);
    case "apply":
      return await applyCommand(call, values.file ?? [], {
        json: plan.json,
        dryRun: values["dry-run"] === true,
      }, out);
    case "scale": {
      const name = encodeURIComponent(first);
      const scaled = await adminAnswer(call, ScaleAnswer, "POST", `/v1/deployments/${name}/scale`, {
        replicas: Number(second),
      });
      for (const w of scaled.warnings) err(`warning: deployment/${first}: ${w.message}\n`);
      const d = await adminAnswer(call, StoredDeploymentSchema, "GET", `/v1/deployments/${name}`);
      print(d, () => `deployment ${first} scaled to ${second}`);
      return 0;
    }
    case "delete":
      return await deleteCommand(call, deleteTarget(plan.positionals), plan.json, out, err);
    case "cordon":
    case "uncordon":
    case "drain":
      return await nodeIntentCommand(call, verb, plan.positionals, {
        json: plan.json,
        out,
        err,
        wait,
      });
    case "apikeys":
      return await apiKeysCommand(call, plan.positionals, { ...values, json: plan.json }, out);
    case "tokens":
      return await tokensCommand(call, plan.positionals, { ...values, json: plan.json }, out);
    case "models":
      return await modelsCommand(
        call,
        plan.positionals,
        { nodes: values.nodes, json: plan.json },
        out,
      );
    case "rollout":
      return await rolloutCommand(
        call,
        [
          ...plan.positionals,
          ...(plan.json ? ["--json"] : []),
          ...(values["to-revision"] === undefined ? [] : ["--to-revision", values["to-revision"]]),
          ...(values.watch === undefined ? [] : [`--watch=${values.watch}`]),
          ...(values.timeout === undefined ? [] : ["--timeout", values.timeout]),
        ],
        out,
        { err, wait: { intervalMs: wait.intervalMs, signal: options.signal } },
      );
  }
}

/** A shard's logs as `GET /v1/replicas/:id/logs` answers them. */
type ShardLogs = z.infer<typeof ShardLogsAnswer>;

/** The `#` line over a shard's log: where it runs, and the probe lines left out. */
function logHeader(logs: ShardLogs, what: string): string {
  const note = probeLinesNote(logs.probe_lines_hidden);
  return `# shard ${logs.shard_id} on ${logs.node}${what}` +
    (note === "" ? "" : `; ${note} (GET ${PROBE_PATHS.join(", ")}; the node's log file has them)`) +
    "\n";
}

/** `logs REPLICA [-f]`: the tail once, or followed until the signal (Ctrl-C). */
async function logs(
  call: AdminCall,
  replica: string,
  values: Values,
  plan: Plan,
  out: (t: string) => void,
  signal?: AbortSignal,
): Promise<number> {
  const path = `/v1/replicas/${encodeURIComponent(replica)}/logs?shard=${
    values.shard ?? "0"
  }&lines=${values.lines ?? "100"}`;
  const first = await adminAnswer(call, ShardLogsAnswer, "GET", path);
  if (!values.follow) {
    if (plan.json) out(JSON.stringify(first, null, 2) + "\n");
    else out(logHeader(first, ` (${first.state})`) + `${first.lines.join("\n")}\n`);
    return 0;
  }
  const emit = (lines: string[]) => {
    for (const line of lines) out(plan.json ? JSON.stringify({ line }) + "\n" : `${line}\n`);
  };
  if (!plan.json) out(logHeader(first, ", following (Ctrl-C stops)"));
  emit(first.lines);
  const stop = signal ?? interruptSignal();
  const intervalMs = Number(values.interval ?? "1000");
  let shown: ShardLogs = first;
  while (!stop.aborted) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, intervalMs);
      stop.addEventListener("abort", () => {
        clearTimeout(timer);
        resolve();
      }, { once: true });
    });
    if (stop.aborted) break;
    const next = await adminAnswer(call, ShardLogsAnswer, "GET", path);
    // A new shard (the replica was placed again) is a new log too.
    const step = advanceLog(next.shard_id === shown.shard_id ? shown : null, next);
    if (!plan.json && next.shard_id !== shown.shard_id) {
      out(`# shard ${next.shard_id} on ${next.node}: the replica was placed again\n`);
    } else if (!plan.json && step.restarted) out("# the log began again (a new agent process)\n");
    else if (!plan.json && step.gap) {
      out(`# ${step.missed ?? "some"} line(s) passed between two reads, not shown\n`);
    }
    emit(step.lines);
    shown = next;
  }
  return 0;
}

/** Aborts on Ctrl-C. */
function interruptSignal(): AbortSignal {
  const ac = new AbortController();
  const onInt = () => {
    Deno.removeSignalListener("SIGINT", onInt);
    ac.abort();
  };
  Deno.addSignalListener("SIGINT", onInt);
  return ac.signal;
}
