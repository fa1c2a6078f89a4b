/**
 * One job per blob being fetched, shared by every snapshot that needs it:
 * two deployments of one model, or two revisions sharing shards, fetch each
 * blob once. A job goes on while any waiter still wants it; when its last
 * waiter aborts, the job is aborted too, and that waiter returns only once
 * the job stopped writing (so a restart never finds two writers of one
 * part file).
 *
 * @module
 */
import type { RepoFile } from "../../models/repo_snapshot.ts";
import {
  type BlobFetchSettings,
  type BlobTarget,
  downloadBlob,
  type ProgressSink,
} from "./blob_download.ts";
import type { LiveSources } from "./live_sources.ts";

interface BlobJob {
  done: Promise<void>;
  controller: AbortController;
  waiters: number;
  sinks: Set<ProgressSink>;
}

/** The jobs under way in one cache, by blob path. */
export class BlobJobs {
  readonly #settings: BlobFetchSettings;
  readonly #verified: (target: BlobTarget) => Promise<void>;
  readonly #jobs = new Map<string, BlobJob>();

  /** Jobs fetching with `settings`; `verified` runs once a blob is in place, before waiters resume. */
  constructor(settings: BlobFetchSettings, verified: (target: BlobTarget) => Promise<void>) {
    this.#settings = settings;
    this.#verified = verified;
  }

  /** Whether a job for `file`'s blob of `repo` is under way. */
  running(repo: string, file: RepoFile): boolean {
    return this.#jobs.has(this.#settings.layout.blobPath(repo, file));
  }

  /**
   * Waits for the blob of `target.file`, starting its job or joining the
   * one under way. When the last waiter aborts, the job is aborted, and
   * that waiter returns only once the job stopped writing.
   */
  async join(
    target: BlobTarget,
    sources: LiveSources,
    sink: ProgressSink,
    signal: AbortSignal,
  ): Promise<void> {
    const key = this.#settings.layout.blobPath(target.repo, target.file);
    let job = this.#jobs.get(key);
    // A job its last waiter left is ending: wait for it, then start anew.
    for (let i = 0; job !== undefined && job.controller.signal.aborted && i < 10; i++) {
      await job.done.catch(() => {});
      job = this.#jobs.get(key);
    }
    if (job === undefined || job.controller.signal.aborted) job = this.#start(key, target, sources);
    const current = job;
    current.waiters++;
    current.sinks.add(sink);
    try {
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          current.waiters--;
          if (current.waiters > 0) return reject(signal.reason);
          current.controller.abort(signal.reason);
          current.done.then(() => resolve(), () => reject(signal.reason));
        };
        if (signal.aborted) return onAbort();
        signal.addEventListener("abort", onAbort, { once: true });
        current.done.then(resolve, reject).finally(() => {
          signal.removeEventListener("abort", onAbort);
          if (!signal.aborted) current.waiters--;
        });
      });
    } finally {
      current.sinks.delete(sink);
    }
  }

  #start(
    key: string,
    target: BlobTarget,
    sources: LiveSources,
  ): BlobJob {
    const sinks = new Set<ProgressSink>();
    const fan: ProgressSink = {
      resumed: (b) => sinks.forEach((s) => s.resumed(b)),
      add: (b) => sinks.forEach((s) => s.add(b)),
      sourceUse: (name, d) => sinks.forEach((s) => s.sourceUse(name, d)),
    };
    const controller = new AbortController();
    const job: BlobJob = { controller, waiters: 0, sinks, done: Promise.resolve() };
    job.done = (async () => {
      try {
        await downloadBlob(target, sources, this.#settings, fan, controller.signal);
        await this.#verified(target);
      } finally {
        this.#jobs.delete(key);
      }
    })();
    job.done.catch(() => {}); // Waiters see the error; this keeps it from being unhandled.
    this.#jobs.set(key, job);
    return job;
  }
}
