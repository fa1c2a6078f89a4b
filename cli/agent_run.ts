/**
 * `llmgw agent run`: the node agent (design §3, §10). Runs until SIGTERM or
 * SIGINT; either stops the agent and leaves the engines running, so an
 * agent restart or upgrade never restarts a model (the next agent adopts
 * them, design §9.2). A second signal exits at once.
 *
 * @module
 */
import { BindError } from "../http/bind_error.ts";
import {
  DEFAULT_PORT_RANGE,
  parsePortRange,
  PortRangeError,
} from "../supervisor/port_allocator.ts";
import {
  Agent,
  AgentError,
  type AgentOptions,
  DEFAULT_LISTEN,
  DEFAULT_PROXY_LISTEN,
  nodeIdProblem,
} from "../agent/agent.ts";
import { createLogger } from "../log/log.ts";
import { pluginDirsFromEnv } from "../engines/registry.ts";
import { discoverySettings } from "./discovery_flags.ts";
import { agentModelOptions, MODEL_CACHE_FLAGS, MODEL_CACHE_USAGE } from "./agent_model_flags.ts";
import { controlUrlsOf, parseFlags, parseListen, UsageError } from "./usage_error.ts";

/** The state directory when none is given. */
export const DEFAULT_STATE_DIR = "/var/lib/llmgw/agent";

/** Usage text of the command. */
export const RUN_USAGE = `Usage: llmgw agent run --control URL [options]

Runs the node agent: discovers this node's GPUs and fabrics, registers with the
control plane, heartbeats, and runs the engine shards the control plane asks for.
Logs are JSON lines on stderr. SIGTERM or SIGINT stops the agent and leaves the
engines running (the next agent adopts them); to stop a node's engines, drain it.

Options:
  --control URL[,URL]    the control planes' URLs, in order of preference
                         (repeatable; env LLMGW_CONTROL_URL; "control" in the
                         config file): calls move to the next on a connection
                         failure or a "not the leader" answer
  --token T              join token (prefer env LLMGW_JOIN_TOKEN: flags show in ps)
  --node-id ID           node id (default: the host name)
  --state-dir DIR        node token, pid files, engine logs (default: ${DEFAULT_STATE_DIR})
  --nvidia-smi PATH      nvidia-smi executable (default: nvidia-smi on PATH)
  --sysfs-root DIR       sysfs root (default: /sys)
  --fabric NAME=HCA,...  assign adapters to an operator-named fabric (repeatable)
  --config FILE          agent config file (JSON: nvidia_smi, sysfs_root, fabrics,
                         ports, state_dir, control, model_cache, download_rate,
                         cache_high, cache_low, hf_token_file)
  --label KEY=VALUE      a node label for deployments' selectors (repeatable)
  --mgmt-addr ADDR       management address (default: the default route's)
  --mgmt-interface IF    management interface, NCCL's bootstrap interface
  --ports FROM-TO        the ports this agent gives its engines, a block of 10 per
                         shard, each checked free (default ${DEFAULT_PORT_RANGE.from}-${DEFAULT_PORT_RANGE.to}; also
                         "ports" in the config file; disjoint ranges for agents
                         sharing a host)
  --listen HOST:PORT     local API address (default: ${DEFAULT_LISTEN.hostname}:${DEFAULT_LISTEN.port})
  --proxy-listen HOST:PORT|off
                         engine proxy address, the one door to this node's engines
                         (default: ${DEFAULT_PROXY_LISTEN.hostname}:${DEFAULT_PROXY_LISTEN.port})
  --local-token T        local API token (prefer env LLMGW_LOCAL_TOKEN; default:
                         generated once into <state-dir>/local_token)
  --engine-plugins DIR   directory of executable engine plugins (repeatable;
                         also env LLMGW_ENGINE_PLUGINS, colon-separated)
${MODEL_CACHE_USAGE}
The hub models are fetched from: env HF_ENDPOINT (default https://huggingface.co,
or a mirror) and HF_TOKEN, or the 0600 file "hf_token_file" in the config file
names. Engines never see the token and never reach the hub.

Trust of an https control plane: env LLMGW_CA (the cluster CA certificate
file), else the CA pinned on an earlier start, else the CA whose hash the
join token carries (llmgw tokens create join).
`;

const LABEL_KEY = /^[A-Za-z0-9]([A-Za-z0-9._/-]{0,251}[A-Za-z0-9])?$/;

/** Parses `KEY=VALUE` labels; a key given twice is a mistake. */
export function parseLabels(flags: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const flag of flags) {
    const eq = flag.indexOf("=");
    const key = eq === -1 ? flag : flag.slice(0, eq);
    if (eq === -1 || !LABEL_KEY.test(key)) {
      throw new UsageError(
        `agent run: --label "${flag}": expected KEY=VALUE with a key of letters, digits, '.', '_', '/', '-'`,
      );
    }
    const value = flag.slice(eq + 1);
    if (value.length > 253) throw new UsageError(`agent run: --label ${key}: value too long`);
    if (key in labels) throw new UsageError(`agent run: --label ${key} given twice`);
    labels[key] = value;
  }
  return labels;
}

function token(
  name: string,
  flag: string | undefined,
  env: string | undefined,
): string | undefined {
  const t = flag ?? env;
  if (t === undefined || t === "") return undefined;
  if (/\s/.test(t)) throw new UsageError(`agent run: the ${name} contains whitespace`);
  return t;
}

/**
 * Turns the command line and environment into agent options (no side
 * effects beyond reading `--config`).
 *
 * @throws {UsageError} Naming the flag that is wrong.
 */
export async function runOptions(
  args: string[],
  env: (name: string) => string | undefined,
): Promise<AgentOptions | "help"> {
  const { values, positionals } = parseFlags("agent run", args, {
    control: { type: "string", multiple: true },
    token: { type: "string" },
    "node-id": { type: "string" },
    "state-dir": { type: "string" },
    "nvidia-smi": { type: "string" },
    "sysfs-root": { type: "string" },
    fabric: { type: "string", multiple: true },
    config: { type: "string" },
    label: { type: "string", multiple: true },
    "mgmt-addr": { type: "string" },
    "mgmt-interface": { type: "string" },
    listen: { type: "string" },
    "proxy-listen": { type: "string" },
    ports: { type: "string" },
    "local-token": { type: "string" },
    "engine-plugins": { type: "string", multiple: true },
    ...MODEL_CACHE_FLAGS,
    help: { type: "boolean", short: "h" },
  });
  if (values.help) return "help";
  if (positionals.length > 0) {
    throw new UsageError(`agent run: unexpected argument "${positionals[0]}"`);
  }
  const joinToken = token("join token", values.token, env("LLMGW_JOIN_TOKEN"));
  if (joinToken === undefined) {
    throw new UsageError("agent run: a join token is required: env LLMGW_JOIN_TOKEN or --token");
  }
  const localToken = token("local token", values["local-token"], env("LLMGW_LOCAL_TOKEN"));
  if (values["node-id"] !== undefined) {
    const problem = nodeIdProblem(values["node-id"]);
    if (problem !== null) throw new UsageError(`agent run: --node-id: ${problem}`);
  }

  const { nvidiaSmi, sysfsRoot, fabrics, ports: configPorts, stateDir, control, models } =
    await discoverySettings("agent run", values);
  const controlUrls = controlUrlsOf("agent run", "--control", [
    values.control,
    env("LLMGW_CONTROL_URL") === undefined ? undefined : [env("LLMGW_CONTROL_URL")!],
    control,
  ]);
  if (controlUrls.length === 0) {
    throw new UsageError("agent run: --control URL is required (or env LLMGW_CONTROL_URL)");
  }
  const controlUrl = controlUrls[0];
  let ports = configPorts;
  if (values.ports !== undefined) {
    try {
      ports = parsePortRange(values.ports, "--ports");
    } catch (e) {
      if (e instanceof PortRangeError) throw new UsageError(`agent run: ${e.message}`);
      throw e;
    }
  }
  const agentStateDir = values["state-dir"] ?? stateDir ?? DEFAULT_STATE_DIR;
  return {
    controlUrl,
    controlUrls,
    joinToken,
    // The cluster CA as a file (docs/security.md), else the one the join token's hash pins.
    ...(env("LLMGW_CA") ? { caFile: env("LLMGW_CA") } : {}),
    localToken,
    nodeId: values["node-id"],
    stateDir: agentStateDir,
    models: await agentModelOptions(values, models, agentStateDir, env),
    discovery: { nvidiaSmi, sysfsRoot, fabrics },
    labels: parseLabels(values.label ?? []),
    mgmtAddr: values["mgmt-addr"],
    mgmtInterface: values["mgmt-interface"],
    ...(ports === undefined ? {} : { ports }),
    listen: values.listen === undefined ? DEFAULT_LISTEN : parseListen(values.listen),
    proxyListen: values["proxy-listen"] === undefined
      ? DEFAULT_PROXY_LISTEN
      : values["proxy-listen"] === "off"
      ? null
      : parseListen(values["proxy-listen"]),
    pluginDirs: [...(values["engine-plugins"] ?? []), ...pluginDirsFromEnv()],
  };
}

/**
 * Runs the agent until SIGTERM or SIGINT; returns the exit code (0 after a
 * clean stop, 1 when it could not start). Usage mistakes throw
 * {@link UsageError} (exit code 2).
 */
export async function agentRunCommand(
  args: string[],
  io: { out: (t: string) => void; err: (t: string) => void },
  version: string,
): Promise<number> {
  const options = await runOptions(args, (name) => Deno.env.get(name));
  if (options === "help") {
    io.out(RUN_USAGE);
    return 0;
  }
  const log = createLogger(
    "agent",
    undefined,
    () => [options.joinToken, options.localToken ?? ""].filter((s) => s !== ""),
  );
  let agent: Agent;
  try {
    agent = new Agent({ ...options, agentVersion: version });
  } catch (e) {
    if (e instanceof AgentError) throw new UsageError(`agent run: ${e.message}`);
    throw e;
  }

  let signalled: (sig: Deno.Signal) => void = () => {};
  const received = new Promise<Deno.Signal>((resolve) => (signalled = resolve));
  let count = 0;
  // SIGTERM first: cli/stop_signals.ts says why.
  const handlers = (["SIGTERM", "SIGINT"] as const).map((sig) => {
    const handler = () => {
      count++;
      if (count > 1) {
        log.warn("second signal: exiting now; engines keep running", { signal: sig });
        Deno.exit(sig === "SIGINT" ? 130 : 143);
      }
      signalled(sig);
    };
    Deno.addSignalListener(sig, handler);
    return [sig, handler] as const;
  });
  try {
    try {
      await agent.start();
    } catch (e) {
      if (e instanceof AgentError || e instanceof BindError) {
        io.err(`llmgw: agent run: ${e.message}\n`);
        return 1;
      }
      throw e;
    }
    log.info("agent running", { version, node_id: agent.nodeId, pid: Deno.pid });
    const sig = await received;
    log.info("stopping; engines keep running for the next agent to adopt", { signal: sig });
    await agent.stop({ stopEngines: false });
    return 0;
  } finally {
    for (const [sig, handler] of handlers) Deno.removeSignalListener(sig, handler);
  }
}
