/**
 * Model revisions the desired state asks this agent to pull into its model
 * cache without a shard (issue #25 item 5: `llmgw models pull`, a
 * rollout's pre-pull): each `models` entry with `pull: true` is fetched
 * through the same fetcher as a shard's model (agent/model_fetch.ts), one
 * download per revision. A pull no longer desired is stopped (its part
 * files stay for a later one to resume). A retryable failure (hub
 * unreachable, a peer gone) is logged and tried again at a later desired
 * state, no sooner than {@link RETRY_MS}; a final one (unknown repo or
 * revision, gated, no room, content failing its hash from every source) is
 * kept in {@link ModelPuller.failures}, which every heartbeat carries while
 * the pull is desired, and tried again only once the pull is asked again:
 * dropped and asked again (the control plane drops it when it hears the
 * failure), or asked under a new request (`requested_at`: an operator
 * pulled again before this agent saw it dropped). A failure names the
 * request it failed under, so the control plane never applies it to a
 * later one. The control plane learns of the progress and the end from the
 * heartbeat's model cache report.
 *
 * @module
 */
import type { DesiredModel } from "../protocol/desired_models.ts";
import type { Logger } from "../log/log.ts";
import type { Clock } from "../time/clock.ts";
import { errorMessage } from "../text/error_message.ts";
import { ModelFetchError } from "../supervisor/model_fetcher.ts";
import type { PullFailureReport } from "../protocol/model_cache_report.ts";
import { REPORT_BOUNDS } from "../protocol/report_bounds.ts";
import { pullFailureKind } from "./pull_failure.ts";

/** A retryable failure is tried again no sooner than this. */
export const RETRY_MS = 30_000;

/** What fetches a revision into the cache: agent/model_fetch.ts's `CacheModelFetcher.pull`. */
export interface RevisionFetcher {
  /** Fetches `model`@`commit` into the cache; answers its snapshot directory. */
  pull(model: string, commit: string, signal: AbortSignal): Promise<string>;
}

/** What a {@link ModelPuller} needs. */
export interface ModelPullerOptions {
  fetcher: RevisionFetcher;
  log: Logger;
  clock: Clock;
}

/** Runs the desired state's pulls. */
export class ModelPuller {
  readonly #o: ModelPullerOptions;
  readonly #running = new Map<string, AbortController>();
  /** Revision → the request it is asked under now (undefined: an older control plane). */
  readonly #asked = new Map<string, number | undefined>();
  /** Revision → when it may be tried again (Infinity: a final failure), and the request it failed under. */
  readonly #failed = new Map<string, { until: number; requestedAt: number | undefined }>();
  /** Revision → its final failure, for the heartbeat. */
  readonly #final = new Map<string, PullFailureReport>();

  /** A puller over `options.fetcher`. */
  constructor(options: ModelPullerOptions) {
    this.#o = options;
  }

  /** Revisions being fetched now, `repo@commit`. */
  get running(): string[] {
    return [...this.#running.keys()];
  }

  /** The pulls still desired that failed for good, oldest first, as many as a heartbeat holds. */
  failures(): PullFailureReport[] {
    return [...this.#final.values()].sort((a, b) => a.at - b.at)
      .slice(0, REPORT_BOUNDS.pullFailures);
  }

  /** Starts the pulls `models` asks for and stops the ones it no longer does. */
  sync(models: readonly DesiredModel[]): void {
    const wanted = new Map<string, DesiredModel>(
      models.filter((m) => m.pull).map((m) => [`${m.model}@${m.commit}`, m]),
    );
    for (const [key, ctl] of this.#running) {
      if (wanted.has(key)) continue;
      ctl.abort(new Error("no longer asked to pull it"));
      this.#running.delete(key);
    }
    this.#asked.clear();
    for (const [key, m] of wanted) this.#asked.set(key, m.requested_at);
    // A pull dropped and asked again, or asked under a new request, is tried again at once.
    for (const [key, failed] of this.#failed) {
      if (wanted.has(key) && this.#asked.get(key) === failed.requestedAt) continue;
      this.#failed.delete(key);
      this.#final.delete(key);
    }
    const now = this.#o.clock.now();
    for (const [key, m] of wanted) {
      if (this.#running.has(key) || (this.#failed.get(key)?.until ?? -Infinity) > now) continue;
      this.#start(key, m);
    }
  }

  /** Stops every pull (the agent stops). */
  stop(): void {
    for (const ctl of this.#running.values()) ctl.abort(new Error("the agent is stopping"));
    this.#running.clear();
    this.#asked.clear();
  }

  #start(key: string, m: DesiredModel): void {
    const { fetcher, log, clock } = this.#o;
    const ctl = new AbortController();
    this.#running.set(key, ctl);
    this.#failed.delete(key);
    this.#final.delete(key);
    log.info("model pull started", { model: m.model, commit: m.commit });
    fetcher.pull(m.model, m.commit, ctl.signal).then(
      (path) => log.info("model pulled", { model: m.model, commit: m.commit, path }),
      (e) => {
        if (ctl.signal.aborted) return;
        const final = e instanceof ModelFetchError && !e.retryable;
        // The request asked now: a newer one that came while the fetch ran was tried by it.
        const requestedAt = this.#asked.get(key);
        this.#failed.set(key, { until: final ? Infinity : clock.now() + RETRY_MS, requestedAt });
        if (final) {
          this.#final.set(key, {
            repo: m.model,
            commit: m.commit,
            kind: pullFailureKind(e).slice(0, REPORT_BOUNDS.failureKind),
            message: errorMessage(e).slice(0, REPORT_BOUNDS.reason),
            at: clock.now(),
            ...(requestedAt === undefined ? {} : { requested_at: requestedAt }),
          });
        }
        log.warn("model pull failed", {
          model: m.model,
          commit: m.commit,
          error: errorMessage(e),
          retry: final ? "not until asked again" : `in ${RETRY_MS / 1000} s or later`,
        });
      },
    ).finally(() => {
      if (this.#running.get(key) === ctl) this.#running.delete(key);
    });
  }
}
