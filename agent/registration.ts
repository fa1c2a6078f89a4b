/**
 * The node's registration with the control plane (design §10): its node
 * token, the id it is registered under and the heartbeat interval.
 *
 * - The node token is stored in `<stateDir>/node_token` (0600) with the
 *   control plane URL and node id it belongs to. A restarted agent
 *   heartbeats with it at once, without registering; it registers again
 *   only when the control plane refuses it (401/403) or when what only a
 *   registration carries changed (labels, addresses, fabrics, GPU models,
 *   agent or engine versions), heartbeating with the old token meanwhile.
 * - Registering retries forever, with backoff, until the agent stops.
 * - Over TLS a registration sends a CSR and serves with the certificate the
 *   control plane signs (agent/agent_tls.ts).
 *
 * @module
 */
import type { EngineRegistry } from "../engines/registry.ts";
import type { FabricAttachment, Gpu } from "../discovery/types.ts";
import type { RegisterRequest } from "../protocol/agent_protocol.ts";
import type { BackoffPolicy } from "../supervisor/backoff.ts";
import { nodeIdProblem } from "./agent_options.ts";
import type { AgentTls } from "./agent_tls.ts";
import type { ControlClient, ControlError } from "./control_client.ts";
import { readSession, removeSession, type StoredSession, writeSession } from "./credentials.ts";
import { engineVersions } from "./engine_versions.ts";
import { errorFields } from "./error_fields.ts";
import { errorMessage } from "../text/error_message.ts";
import type { Logger } from "../log/log.ts";
import { type NodeIdentity, registerRequest, registrationFingerprint } from "./reports.ts";
import { retryDelay, sleep } from "./retry.ts";

const MIN_HEARTBEAT_MS = 100;
const MAX_HEARTBEAT_MS = 600_000;
const DEFAULT_HEARTBEAT_MS = 5_000;

/** What a registration carries besides the engine versions, read when one is sent. */
export interface RegistrationFacts {
  /** Who the node is and where it is reached. */
  identity: NodeIdentity;
  /** Its hardware as discovered. */
  hardware: { gpus: Gpu[]; fabrics: FabricAttachment[] };
  /** The local API token, sent when the local API listens (`agentUrl`). */
  localToken: string | null;
  /** The engine proxy's URL, when it listens. */
  proxyUrl: string | null;
  /** The engine proxy's credential, sent with its URL. */
  proxyToken: string | null;
}

/** What a {@link Registration} needs. */
export interface RegistrationOptions {
  /** The control plane; it holds the node token. */
  client: Pick<ControlClient, "register" | "nodeToken" | "setNodeToken">;
  /** The node id asked for. */
  nodeId: string;
  /** Where the node token is stored. */
  stateDir: string;
  /** The control plane URL stored with the token. */
  controlUrl: string;
  /** Every control plane URL, `controlUrl` first; a stored token belongs to this list. */
  controlUrls: readonly string[];
  /** The operator's heartbeat interval, overriding the control plane's. */
  heartbeatIntervalMs?: number;
  /** The agent's TLS, null without. */
  tls: () => AgentTls | null;
  /** What the next registration carries. */
  facts: () => RegistrationFacts;
  /** Called after every successful registration. */
  onRegistered: () => void;
  /** Delays between attempts. */
  retry: BackoffPolicy;
  /** Where attempts and failures go. */
  log: Logger;
  /** Aborted when the agent stops. */
  signal: AbortSignal;
}

/** Keeps the node registered: the stored token, re-registration, refused tokens. */
export class Registration {
  readonly #opts: RegistrationOptions;
  #registeredId: string;
  #intervalMs: number;
  #registering: Promise<boolean> | null = null;
  #engineVersions: Record<string, string> = {};
  #versionsKnown = false;
  #versionsReady: Promise<void> = Promise.resolve();
  /** Node tokens refused in a row: a control plane that refuses what it just issued is not hammered. */
  #refusals = 0;

  /** Creates the registration; nothing is sent until {@link ensureRegistered}. */
  constructor(options: RegistrationOptions) {
    this.#opts = options;
    this.#registeredId = options.nodeId;
    this.#intervalMs = clampInterval(options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_MS);
  }

  /** The node id as registered. */
  get registeredId(): string {
    return this.#registeredId;
  }

  /** Engine name → version installed on this host; null until the engines were asked. */
  get engineVersions(): Readonly<Record<string, string>> | null {
    return this.#versionsKnown ? this.#engineVersions : null;
  }

  /** The heartbeat interval in use. */
  get intervalMs(): number {
    return this.#intervalMs;
  }

  /**
   * Asks the engines their versions in the background: a registration waits
   * for them (a Python engine takes seconds), heartbeats with a stored token
   * do not.
   */
  loadEngineVersions(registry: EngineRegistry, env: Record<string, string> | undefined): void {
    const { log, signal } = this.#opts;
    this.#versionsReady = engineVersions(registry, { env, signal }).then((v) => {
      this.#engineVersions = v;
      this.#versionsKnown = true;
      if (!signal.aborted) log.info("engine versions", { engines: v });
    });
  }

  /** Takes up the stored node token, if there is one for this control plane and node. */
  resume(): StoredSession | null {
    const o = this.#opts;
    const stored = readSession(o.stateDir, o.controlUrls, o.nodeId);
    if (stored !== null) this.#useSession(stored, "reusing the stored node token");
    return stored;
  }

  /**
   * A restarted agent keeps its node token, but what only a registration
   * carries (labels, addresses, fabrics, GPU models, agent and engine
   * versions) may have changed with the restart (an upgrade, a new label):
   * then it registers again, heartbeating with the old token meanwhile.
   */
  async refreshIfChanged(stored: StoredSession): Promise<void> {
    await this.#versionsReady;
    if (this.#opts.signal.aborted || this.#opts.client.nodeToken !== stored.node_token) return;
    if (registrationFingerprint(this.#request()) === stored.fingerprint) return;
    this.#opts.log.info("node facts changed since the last registration; registering again");
    if (this.#registering === null) {
      this.#registering = this.#register().finally(() => (this.#registering = null));
    }
    await this.#registering;
  }

  /** True once a node token is held; false when the agent is stopping. */
  ensureRegistered(): Promise<boolean> {
    if (this.#opts.client.nodeToken !== null) return Promise.resolve(true);
    if (this.#registering === null) {
      this.#registering = this.#register().finally(() => (this.#registering = null));
    }
    return this.#registering;
  }

  /** The control plane took the node token: refusals no longer count. */
  accepted(): void {
    this.#refusals = 0;
  }

  /**
   * The control plane refused `token`: forget it (once) and register again.
   * Waits first when tokens keep being refused right after registering.
   */
  async refused(token: string | null, e: ControlError): Promise<void> {
    const { client, log } = this.#opts;
    if (token !== null && client.nodeToken === token) {
      this.#refusals++;
      log.warn("the control plane refused the node token; registering again", {
        status: e.status,
        code: e.code,
      });
      client.setNodeToken(null);
      removeSession(this.#opts.stateDir);
    }
    if (this.#refusals > 1) {
      await sleep(retryDelay(this.#refusals - 1, this.#opts.retry), this.#opts.signal);
    }
  }

  #request(): RegisterRequest {
    const f = this.#opts.facts();
    const req = registerRequest(f.identity, f.hardware, this.#engineVersions);
    // The control plane fetches shard logs from the local API with this token (`llmgw logs`).
    const withToken = f.identity.agentUrl !== null && f.localToken !== null
      ? { ...req, agent_token: f.localToken }
      : req;
    // Gateways reach this node's engines through the proxy, with this credential.
    return f.proxyUrl !== null && f.proxyToken !== null
      ? { ...withToken, proxy_url: f.proxyUrl, proxy_token: f.proxyToken }
      : withToken;
  }

  #useSession(s: StoredSession, why: string): void {
    this.#opts.client.setNodeToken(s.node_token);
    this.#registeredId = s.registered_id;
    this.#intervalMs = clampInterval(this.#opts.heartbeatIntervalMs ?? s.heartbeat_interval_ms);
    this.#opts.log.info(why, {
      node_id: s.registered_id,
      heartbeat_interval_ms: this.#intervalMs,
    });
  }

  async #register(): Promise<boolean> {
    const { client, nodeId, log, signal } = this.#opts;
    await this.#versionsReady;
    let attempt = 0;
    while (!signal.aborted) {
      const req = this.#request();
      try {
        const tls = this.#opts.tls();
        const csr = tls === null ? undefined : await tls.csr(`node:${nodeId}`);
        const res = await client.register(csr === undefined ? req : { ...req, csr }, signal);
        if (tls !== null && res.certificate !== undefined) {
          await tls.accept(res.certificate);
          log.info("serving with a certificate signed at registration", {
            expires: new Date(tls.notAfterMs!).toISOString(),
          });
        }
        const registeredId = nodeIdProblem(res.node_id) === null ? res.node_id : nodeId;
        if (registeredId !== nodeId) {
          log.warn("the control plane registered this node under another id", {
            node_id: nodeId,
            registered_id: registeredId,
          });
        }
        const session: StoredSession = {
          control_url: this.#opts.controlUrl,
          node_id: nodeId,
          registered_id: registeredId,
          node_token: res.node_token,
          heartbeat_interval_ms: res.heartbeat_interval_ms,
          fingerprint: registrationFingerprint(req),
        };
        try {
          writeSession(this.#opts.stateDir, session);
        } catch (e) {
          log.error("cannot store the node token; a restart will register again", {
            error: errorMessage(e),
          });
        }
        this.#useSession(session, "registered");
        // The registration carried the GPUs; a new identity's generation is
        // taken as it is (design §10: the control plane that forgot us decides).
        this.#opts.onRegistered();
        return true;
      } catch (e) {
        if (signal.aborted) return false;
        attempt++;
        const delay = retryDelay(attempt, this.#opts.retry);
        log.warn("registration failed", { ...errorFields(e), attempt, retry_in_ms: delay });
        await sleep(delay, signal);
      }
    }
    return false;
  }
}

/** The heartbeat interval within bounds; a non-finite one is the default. */
export function clampInterval(ms: number): number {
  if (!Number.isFinite(ms)) return DEFAULT_HEARTBEAT_MS;
  return Math.min(MAX_HEARTBEAT_MS, Math.max(MIN_HEARTBEAT_MS, ms));
}
