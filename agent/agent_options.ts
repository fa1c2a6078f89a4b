/**
 * What an {@link Agent} is started with (design §3, §10): its settings, the
 * errors of a configuration it cannot use, and the defaults of its listeners.
 *
 * @module
 */
import type { FabricConfig } from "../discovery/fabrics.ts";
import { RegisterRequestSchema } from "../protocol/agent_protocol.ts";
import type { BackoffPolicy } from "../supervisor/backoff.ts";
import type { PortRange } from "../supervisor/port_allocator.ts";
import type { SupervisorOptions } from "../supervisor/types.ts";
import type { Clock } from "../time/clock.ts";
import type { AgentModelOptions } from "./agent_models.ts";

/** Settings of an an agent; every time is in milliseconds. */
export interface AgentOptions {
  /** The control plane's URL. */
  controlUrl: string;
  /**
   * Every control plane's URL, `controlUrl` first (issue #15): calls move to
   * the next on a connection failure or a "not the leader" answer.
   * Default: `[controlUrl]`.
   */
  controlUrls?: readonly string[];
  /** The join token, used only to register. */
  joinToken: string;
  /** A CA certificate file to trust for an https control plane (`LLMGW_CA`); default: pinned by the join token. */
  caFile?: string;
  /** The node id. Default: the host name. */
  nodeId?: string;
  /** The host name reported. Default: `Deno.hostname()`. */
  hostname?: string;
  /** Where the node token, the local token and the supervisor's pid files and logs live. */
  stateDir: string;
  /** Discovery's seams (design §5.5) and the operator's fabrics (design §5.2). */
  discovery?: {
    /** nvidia-smi executable. */
    nvidiaSmi?: string;
    /** sysfs root. */
    sysfsRoot?: string;
    /** Fabric name → adapters. */
    fabrics?: FabricConfig;
    /** Per nvidia-smi call. */
    timeoutMs?: number;
  };
  /** Operator labels. */
  labels?: Record<string, string>;
  /** Management address. Default: the default route's interface address. */
  mgmtAddr?: string;
  /** Management interface. Default: the one holding the management address. */
  mgmtInterface?: string;
  /**
   * The ports this agent gives its engines, a block per shard, each checked
   * free when taken. Default `DEFAULT_PORT_RANGE` (supervisor/port_allocator.ts); set disjoint ranges
   * when several agents share a host.
   */
  ports?: PortRange;
  /** Where the local API listens; null: no local API. Default 0.0.0.0:9180. */
  listen?: { hostname: string; port: number } | null;
  /** The URL the control plane reaches the local API on. Default: from `listen` and the address. */
  agentUrl?: string;
  /** The local API token. Default: generated once into `<stateDir>/local_token`. */
  localToken?: string;
  /**
   * Where the engine proxy listens, the one door to this node's engines
   * (they listen on loopback); null: none (gateways then reach engines
   * directly, which needs them reachable). Default 0.0.0.0:9181.
   */
  proxyListen?: { hostname: string; port: number } | null;
  /** The URL gateways reach the engine proxy on. Default: from `proxyListen` and the address. */
  proxyUrl?: string;
  /** The engine proxy's credential. Default: generated once into `<stateDir>/proxy_token`. */
  proxyToken?: string;
  /** Directories with executable engine plugins (design §8). */
  pluginDirs?: string[];
  /** Supervisor settings (tick, timeouts, engine environment, …). */
  supervisor?: Omit<SupervisorOptions, "stateDir" | "onEvent" | "onReady" | "models">;
  /**
   * The model cache (issue #25): each shard's model is fetched into it
   * before its engine starts, and engines run from it with the hub switched
   * off. `llmgw agent run` always sets it; absent, engines are given the
   * model as the deployment names it (tests on simulated hardware).
   */
  models?: AgentModelOptions;
  /** Heartbeat interval, overriding the control plane's. */
  heartbeatIntervalMs?: number;
  /** How often GPUs are rediscovered for their health. Default 60,000. */
  rediscoverMs?: number;
  /** How long one desired-state long poll may be held. Default 30,000. */
  longPollMs?: number;
  /** Deadline of one register or heartbeat call. Default 10,000. */
  requestTimeoutMs?: number;
  /** Retry delays after failed control-plane calls. Default 1 s doubling to 30 s, jittered. */
  retry?: BackoffPolicy;
  /** This agent's version, reported at registration. */
  agentVersion?: string;
  /** Receives every log line (JSON). Default: stderr. */
  logSink?: (line: string) => void;
  /**
   * The time the agent's loops, its TLS and its supervisor read (unless
   * `supervisor.clock` names another). Default: the system clock.
   */
  clock?: Clock;
}

/** What {@link Agent.stop} does with the engines. */
export interface StopOptions {
  /**
   * True: stop every engine (`supervisor.shutdown()`). False: leave them
   * running for the next agent to adopt (`supervisor.detach()`), which is
   * what an agent restart or upgrade does.
   */
  stopEngines: boolean;
}

/** A configuration the agent cannot start with. */
export class AgentError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "AgentError";
  }
}

/** Why `id` cannot be a node id (the protocol's rule), or null when it can. */
export function nodeIdProblem(id: string): string | null {
  const r = RegisterRequestSchema.shape.node_id.safeParse(id);
  return r.success ? null : `node id "${id}" ${r.error.issues[0].message}`;
}

/** The local API's default address. */
export const DEFAULT_LISTEN = { hostname: "0.0.0.0", port: 9180 };

/** Where the engine proxy listens by default. */
export const DEFAULT_PROXY_LISTEN = { hostname: "0.0.0.0", port: 9181 };
