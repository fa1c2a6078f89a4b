/**
 * The llmgw command line: dispatches on role (design §3).
 *
 * @module
 */
import { deploymentJsonSchema } from "../deployment/schema.ts";
import { ADMIN_USAGE, ADMIN_VERBS, adminCommand, AdminError } from "./admin_commands.ts";
import { INVENTORY_USAGE, inventoryCommand } from "./agent_inventory.ts";
import { agentRunCommand } from "./agent_run.ts";
import { CONTROL_USAGE, controlServeCommand } from "./control_serve.ts";
import { controlInitCommand } from "./control_init.ts";
import { devCommand } from "./dev_command.ts";
import { GATEWAY_USAGE, gatewayServeCommand } from "./gateway_serve.ts";
import { planCommand } from "./plan_command.ts";
import { refuseExtra } from "./names.ts";
import { parseFlags, UsageError } from "./usage_error.ts";
import { errorMessage } from "../text/error_message.ts";

/** The version printed by `llmgw version`. */
export const VERSION = "0.1.0";

/** Top-level usage. */
export const USAGE = `llmgw ${VERSION}: run open-weight LLMs on a fleet of GPU hosts

Usage: llmgw <role> <command> [options]

Roles and commands:
  agent inventory   print what the scheduler would see on this node
  agent run         run the node agent (until SIGTERM/SIGINT; engines keep running)
  plan              place a deployment's replicas on a cluster file, explained
  schema deployment print the JSON Schema of deployment files
  dev [--dir DIR] [--port P]
                    the all-in-one local cluster: control plane, agents on simulated
                    hardware, the fake engine, sample deployments (Ctrl-C stops all);
                    every port it uses is in P…P+999 (llmgw dev --help)
  dev machines      what discovery sees on the recorded and simulated machines
  version           print the version
  help              print this help

  control serve     run the control plane (API, reconciler, store)
  gateway serve     run the OpenAI-compatible gateway in front of ready replicas
${ADMIN_USAGE}
Every command has its own help: 'llmgw COMMAND --help' or 'llmgw help COMMAND'.
`;

/** Usage of `llmgw version`. */
export const VERSION_USAGE = `Usage: llmgw version [--json]

Prints llmgw's version.
  --json   as {"version": "…"}
`;

/** Usage of `llmgw schema`. */
export const SCHEMA_USAGE = `Usage: llmgw schema deployment

Prints the JSON Schema of deployment files (for editors and CI checks).
`;

/** Output sinks, injectable for tests. */
export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

const encoder = new TextEncoder();

/** Standard output and error. */
export const STD_IO: Io = {
  out: (t) => Deno.stdout.writeSync(encoder.encode(t)),
  err: (t) => Deno.stderr.writeSync(encoder.encode(t)),
};

/**
 * Runs the CLI with `args` (without the program name) and returns the exit
 * code: 0 success, 1 failure, 2 usage error. Never lets an exception out.
 */
export async function main(args: string[], io: Io = STD_IO): Promise<number> {
  try {
    return await dispatch(args, io);
  } catch (e) {
    // The reader left (`llmgw get events | head -1`): it has what it wanted.
    if (isBrokenPipe(e)) return 0;
    if (e instanceof UsageError) {
      const command = e.command ?? commandOf(e.message);
      const help = command === undefined ? "llmgw help" : `llmgw ${command} --help`;
      // One line: what was wrong, where, and where the fix is.
      io.err(`llmgw: ${e.message.replace(/\s*\n\s*/g, " ")}; run '${help}' for usage\n`);
      return 2;
    }
    const detail = Deno.env.get("LLMGW_DEBUG") && e instanceof Error ? `\n${e.stack}` : "";
    io.err(`llmgw: internal error: ${errorMessage(e)}${detail}\n`);
    return 1;
  }
}

/**
 * True for a write to a pipe whose reader has gone. Such a CLI exits
 * quietly, as others do, rather than report an internal error.
 */
export function isBrokenPipe(e: unknown): boolean {
  return e instanceof Deno.errors.BrokenPipe ||
    (e instanceof Error && (e as { code?: string }).code === "EPIPE");
}

/** Every command path that has its own `--help`. */
export const COMMAND_PATHS: readonly string[] = [
  "agent inventory",
  "agent run",
  "plan",
  "schema deployment",
  "dev",
  "dev machines",
  "version",
  "control serve",
  "control init",
  "gateway serve",
  ...ADMIN_VERBS,
];

/** The command a usage message names first ("dev machines: …" → "dev machines"). */
function commandOf(message: string): string | undefined {
  const head = /^([a-z]+(?: [a-z]+)?):/.exec(message)?.[1];
  if (head === undefined) return undefined;
  if (COMMAND_PATHS.includes(head)) return head;
  const first = head.split(" ")[0];
  return COMMAND_PATHS.includes(first) ? first : undefined;
}

async function dispatch(args: string[], io: Io): Promise<number> {
  const [role, command, ...rest] = args;
  switch (role) {
    case "help":
      // `llmgw help get` is `llmgw get --help`.
      if (command !== undefined) return await dispatch([command, ...rest, "--help"], io);
      io.out(USAGE);
      return 0;
    case undefined:
    case "--help":
    case "-h":
      io.out(USAGE);
      return 0;
    case "version":
    case "--version": {
      const { values, positionals } = parseFlags(
        "version",
        command === undefined ? rest : [command, ...rest],
        { json: { type: "boolean" }, help: { type: "boolean", short: "h" } },
      );
      refuseExtra("version", positionals, []);
      if (values.help) io.out(VERSION_USAGE);
      else if (values.json) io.out(JSON.stringify({ version: VERSION }) + "\n");
      else io.out(`llmgw ${VERSION}\n`);
      return 0;
    }
    case "agent":
      if (command === "inventory") return await inventoryCommand(rest, io.out);
      if (command === "run") return await agentRunCommand(rest, io, VERSION);
      if (command === undefined || command === "help" || command === "--help") {
        io.out(INVENTORY_USAGE);
        return 0;
      }
      throw new UsageError(`agent: unknown command "${command}" (known: inventory, run)`, "agent");
    case "schema": {
      if (command === undefined || command === "--help" || command === "-h") {
        io.out(SCHEMA_USAGE);
        return 0;
      }
      if (command !== "deployment") {
        throw new UsageError(`schema: expected "schema deployment", got "${command}"`, "schema");
      }
      const { values, positionals } = parseFlags("schema deployment", rest, {
        help: { type: "boolean", short: "h" },
      });
      refuseExtra("schema deployment", positionals, []);
      if (values.help) io.out(SCHEMA_USAGE);
      else io.out(JSON.stringify(deploymentJsonSchema(), null, 2) + "\n");
      return 0;
    }
    case "plan":
      return await planCommand(command === undefined ? rest : [command, ...rest], io.out, io.err);
    case "dev":
      return await devCommand(
        command === undefined ? rest : [command, ...rest],
        io.out,
        undefined,
        io.err,
      );
    case "control":
      if (command === "serve") return await controlServeCommand(rest, io.out, io.err);
      if (command === "init") return await controlInitCommand(rest, io.out, io.err);
      if (command === undefined || command === "help" || command === "--help") {
        io.out(CONTROL_USAGE);
        return 0;
      }
      throw new UsageError(`control: unknown command "${command}" (known: serve, init)`, "control");
    case "gateway":
      if (command === "serve") return await gatewayServeCommand(rest, io.out, io.err);
      if (command === undefined || command === "help" || command === "--help") {
        io.out(GATEWAY_USAGE);
        return 0;
      }
      throw new UsageError(`gateway: unknown command "${command}" (known: serve)`, "gateway");
    default:
      if (ADMIN_VERBS.has(role)) {
        try {
          return await adminCommand(
            role,
            command === undefined ? rest : [command, ...rest],
            io.out,
            { err: io.err },
          );
        } catch (e) {
          if (!(e instanceof AdminError)) throw e;
          io.err(`llmgw: ${e.message}\n`);
          return 1;
        }
      }
      throw new UsageError(`unknown role or command "${role}"`);
  }
}
