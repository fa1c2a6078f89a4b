/**
 * The heartbeat loop (design §10): every interval the agent reports its
 * shards' states and the generation whose reconcile finished; GPUs go out
 * with the first heartbeat after each discovery. An answer brings the
 * control plane's generation (a newer one wakes the desired-state poll) and
 * the live metrics tokens; a refused node token sends the agent to register
 * again. Failures back off from the interval, capped, jittered.
 *
 * Over TLS it also renews the serving certificate when due, in the
 * background.
 *
 * @module
 */
import type { HeartbeatRequest } from "../protocol/agent_protocol.ts";
import type { BackoffPolicy } from "../supervisor/backoff.ts";
import type { ShardReport } from "../supervisor/types.ts";
import type { AgentTls } from "./agent_tls.ts";
import { type ControlClient, ControlError } from "./control_client.ts";
import type { DesiredStateLoop } from "./desired_state_loop.ts";
import type { DiscoveryLoop } from "./discovery_loop.ts";
import { errorFields } from "./error_fields.ts";
import type { Logger } from "../log/log.ts";
import type { Registration } from "./registration.ts";
import { gpuReport, shardReport } from "./reports.ts";
import { retryDelay, sleep } from "./retry.ts";
import type { ModelCacheReporter } from "./model_cache_report.ts";
import { type Clock, systemClock } from "../time/clock.ts";

/** What a {@link HeartbeatLoop} needs. */
export interface HeartbeatLoopOptions {
  /** The control plane. */
  client: Pick<ControlClient, "heartbeat" | "renewCertificate" | "nodeToken">;
  /** The node's registration: its id, interval, and what to do with a refused token. */
  session: Pick<
    Registration,
    "ensureRegistered" | "refused" | "accepted" | "registeredId" | "intervalMs"
  >;
  /** GPUs waiting to be reported. */
  discovery: Pick<DiscoveryLoop, "pendingGpus" | "delivered">;
  /** The generation running, and the poll to wake when the control plane has another. */
  desired: Pick<DesiredStateLoop, "generation" | "ignoredGeneration" | "wake">;
  /** The supervisor's shards. */
  shards: () => ShardReport[];
  /** The model cache's reporter; null without a cache (agent/model_cache_report.ts). */
  modelCache?: () => Pick<ModelCacheReporter, "report" | "delivered"> | null;
  /** The agent's TLS, null without. */
  tls: () => AgentTls | null;
  /** Its delays cap at the larger of the interval and this policy's maximum. */
  retry: BackoffPolicy;
  /** Where failures and recoveries go. */
  log: Logger;
  /** Aborted when the agent stops. */
  signal: AbortSignal;
  /** Dates the last answer ({@link HeartbeatLoop.lastHeartbeatAt}). Default: the system clock. */
  clock?: Clock;
}

/** Heartbeats until the agent stops. */
export class HeartbeatLoop {
  readonly #opts: HeartbeatLoopOptions;
  #lastAt: number | null = null;
  #failures = 0;
  /** SHA-256 (hex) of the metrics tokens, from the last heartbeat answer that carried them. */
  #metricsTokenHashes: readonly string[] = [];

  /** Creates the loop; {@link run} runs it. */
  constructor(options: HeartbeatLoopOptions) {
    this.#opts = options;
  }

  /** When the last heartbeat was answered (ms since epoch); null before one was. */
  get lastHeartbeatAt(): number | null {
    return this.#lastAt;
  }

  /** Heartbeats failed in a row (0 when the last one was answered). */
  get failures(): number {
    return this.#failures;
  }

  /** SHA-256 (hex) of the live metrics tokens, as last heard. */
  get metricsTokenHashes(): readonly string[] {
    return this.#metricsTokenHashes;
  }

  /** Heartbeats until the agent stops; never throws for an outage. */
  async run(): Promise<void> {
    const { client, session, discovery, desired, retry, log, signal } = this.#opts;
    while (!signal.aborted) {
      if (!await session.ensureRegistered()) return;
      const token = client.nodeToken;
      const gpus = discovery.pendingGpus;
      const cache = this.#opts.modelCache?.() ?? null;
      const modelCache = await cache?.report() ?? null;
      const req: HeartbeatRequest = {
        node_id: session.registeredId,
        generation: desired.generation,
        shards: this.#opts.shards().map(shardReport),
        ...(gpus === null ? {} : { gpus: gpus.map(gpuReport) }),
        ...(modelCache === null ? {} : { model_cache: modelCache }),
      };
      let delay = session.intervalMs;
      try {
        const res = await client.heartbeat(req, signal);
        if (this.#failures > 0) {
          log.info("control plane reachable again", { after_failures: this.#failures });
        }
        this.#failures = 0;
        session.accepted();
        this.#lastAt = (this.#opts.clock ?? systemClock).now();
        discovery.delivered(gpus);
        if (modelCache !== null) cache?.delivered(modelCache);
        // Revoked tokens stop working within one heartbeat; without an answer the last list holds.
        if (res.metricsTokenHashes !== null) this.#metricsTokenHashes = res.metricsTokenHashes;
        if (this.#opts.tls()?.renewalDue()) this.#renew();
        const g = res.generation;
        if (g !== null && g !== desired.generation && g !== desired.ignoredGeneration) {
          desired.wake();
        }
      } catch (e) {
        if (signal.aborted) return;
        if (e instanceof ControlError && e.unauthorized) {
          await session.refused(token, e);
          continue;
        }
        this.#failures++;
        const interval = session.intervalMs;
        delay = retryDelay(this.#failures, {
          initialMs: interval,
          maxMs: Math.max(interval, retry.maxMs),
          factor: 2,
        });
        log.warn("heartbeat failed", {
          ...errorFields(e),
          failures: this.#failures,
          retry_in_ms: delay,
        });
      }
      await sleep(delay, signal);
    }
  }

  /** Renews the serving certificate in the background; a failure is counted and retried next beat. */
  #renew(): void {
    const { client, session, log, signal } = this.#opts;
    this.#opts.tls()?.renewInBackground(
      (csr) => client.renewCertificate(csr, signal),
      `node:${session.registeredId}`,
      (ok, fields) => {
        if (signal.aborted) return;
        if (ok) log.info("renewed the serving certificate", fields);
        else log.warn("cannot renew the serving certificate", fields);
      },
    );
  }
}
