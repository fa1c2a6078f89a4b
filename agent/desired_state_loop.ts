/**
 * The desired-state loop (design §10): long-polls the control plane for the
 * node's desired state and reconciles the supervisor to it.
 *
 * - Fencing: a desired state older than the generation running is ignored
 *   (logged once, polled again with backoff). After a registration the
 *   control plane's generation is taken whatever it is: a control plane
 *   that forgot the node decides afresh.
 * - Level-triggered: every answer is reconciled, also one of the same
 *   generation (a no-op when nothing differs). A shard whose launch the
 *   engine plugin refuses becomes a `failed` shard carrying the reason
 *   (agent/prepare_shard.ts). A desired state with a launch that does not
 *   match the protocol's schema (protocol/shard_launch.ts) is refused whole,
 *   logged with the shard and the field, and polled again with backoff; what
 *   runs keeps running.
 * - A heartbeat that learns of a newer generation, or a registration, wakes
 *   a held poll so that it asks again at once.
 *
 * @module
 */
import type { BackoffPolicy } from "../supervisor/backoff.ts";
import type { DesiredShard, DesiredState } from "../protocol/agent_protocol.ts";
import { type ControlClient, ControlError } from "./control_client.ts";
import { errorFields } from "./error_fields.ts";
import { errorMessage } from "../text/error_message.ts";
import type { Logger } from "../log/log.ts";
import type { Registration } from "./registration.ts";
import { retryDelay, sleep } from "./retry.ts";
import { type Clock, systemClock } from "../time/clock.ts";

/** Answers that bring nothing new come no faster than this (a control plane that does not hold). */
const MIN_POLL_MS = 1_000;

/** What a {@link DesiredStateLoop} needs. */
export interface DesiredStateLoopOptions {
  /** The control plane. */
  client: Pick<ControlClient, "desired" | "nodeToken">;
  /** The node's registration: the loop waits for one, and hands refused tokens back. */
  session: Pick<Registration, "ensureRegistered" | "refused">;
  /** Reconciles the supervisor to these shards. */
  reconcile: (shards: DesiredShard[]) => Promise<void>;
  /** Sees each state once reconciled (the model pulls it asks for: agent/model_pulls.ts). */
  onApplied?: (state: DesiredState) => void;
  /** How long one long poll may be held. Default 30,000. */
  longPollMs?: number;
  /** Retry delays after failed polls and ignored states. */
  retry: BackoffPolicy;
  /** Where failures and applied states go. */
  log: Logger;
  /** Aborted when the agent stops. */
  signal: AbortSignal;
  /** Times each poll (answers bringing nothing come at most once a second). Default: the system clock. */
  clock?: Clock;
}

/** Long-polls the desired state and applies it. */
export class DesiredStateLoop {
  readonly #opts: DesiredStateLoopOptions;
  #generation = 0;
  /** After a (re-)registration the control plane's generation is taken whatever it is. */
  #fenceReset = false;
  #ignoredGeneration: number | null = null;
  /** The last state reconciled: its pinned and pulled models keep the cache (model_cache_report.ts). */
  #applied: DesiredState | null = null;
  /** The state being reconciled, or the last one: its model sources serve the fetches it starts. */
  #received: DesiredState | null = null;
  #wakeCtl: AbortController | null = null;

  /** Creates the loop; {@link run} runs it. */
  constructor(options: DesiredStateLoopOptions) {
    this.#opts = options;
  }

  /** The generation whose reconcile finished (0 before the first). */
  get generation(): number {
    return this.#generation;
  }

  /** The last desired state reconciled; null before the first. */
  get applied(): DesiredState | null {
    return this.#applied;
  }

  /** The desired state being reconciled now, else the last one; null before the first. */
  get received(): DesiredState | null {
    return this.#received;
  }

  /** The older generation being ignored (fencing); null when none is. */
  get ignoredGeneration(): number | null {
    return this.#ignoredGeneration;
  }

  /** Ends a held poll so that the loop asks again at once. */
  wake(): void {
    this.#wakeCtl?.abort();
  }

  /** The node (re-)registered: the next answer is taken whatever its generation (design §10). */
  registered(): void {
    this.#fenceReset = true;
    this.#ignoredGeneration = null;
    this.wake();
  }

  /** Polls and applies until the agent stops; never throws for an outage. */
  async run(): Promise<void> {
    const { client, session, retry, log } = this.#opts;
    const stop = this.#opts.signal;
    let failures = 0;
    let stale = 0;
    const longPollMs = this.#opts.longPollMs ?? 30_000;
    const clock = this.#opts.clock ?? systemClock;
    while (!stop.aborted) {
      if (!await session.ensureRegistered()) return;
      const token = client.nodeToken;
      const wake = new AbortController();
      this.#wakeCtl = wake;
      const signal = AbortSignal.any([stop, wake.signal]);
      const began = clock.now();
      let progressed = false;
      try {
        const state = await client.desired(this.#generation, longPollMs, signal);
        failures = 0;
        if (state !== null && state.generation < this.#generation && !this.#fenceReset) {
          // Fencing (design §10): an older desired state never resurrects shards.
          if (this.#ignoredGeneration !== state.generation) {
            log.warn("ignoring an older desired state", {
              generation: state.generation,
              running: this.#generation,
            });
          }
          this.#ignoredGeneration = state.generation;
          stale++;
          await sleep(retryDelay(stale, retry), signal);
          continue;
        }
        stale = 0;
        if (state !== null) progressed = await this.#apply(state);
      } catch (e) {
        if (stop.aborted) return;
        if (wake.signal.aborted) continue;
        if (e instanceof ControlError && e.unauthorized) {
          await session.refused(token, e);
          continue;
        }
        failures++;
        const delay = retryDelay(failures, retry);
        log.warn("desired state poll failed", {
          ...errorFields(e),
          failures,
          retry_in_ms: delay,
        });
        await sleep(delay, signal);
        continue;
      }
      const elapsed = clock.now() - began;
      if (!progressed && elapsed < MIN_POLL_MS) await sleep(MIN_POLL_MS - elapsed, signal);
    }
  }

  /** Reconciles to `state`; true when it was a new generation. */
  async #apply(state: DesiredState): Promise<boolean> {
    this.#received = state;
    const log = this.#opts.log;
    const seen = new Set<string>();
    const shards: DesiredShard[] = [];
    for (const s of state.shards) {
      if (seen.has(s.id)) {
        log.warn("desired state lists a shard twice; the first wins", { shard: s.id });
        continue;
      }
      seen.add(s.id);
      // The client checked the launch's shape and bounds; whether it makes
      // sense is the engine plugin's to judge, and a refusal is a failed shard.
      shards.push(s);
    }
    try {
      await this.#opts.reconcile(shards);
    } catch (e) {
      log.error("reconcile failed", { generation: state.generation, error: errorMessage(e) });
      return false;
    }
    const previous = this.#generation;
    this.#applied = state;
    this.#opts.onApplied?.(state);
    this.#generation = state.generation;
    this.#fenceReset = false;
    this.#ignoredGeneration = null;
    if (previous !== state.generation) {
      log.info("desired state applied", {
        generation: state.generation,
        previous,
        shards: shards.map((s) => s.id),
      });
      return true;
    }
    return false;
  }
}
