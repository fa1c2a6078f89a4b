/**
 * One shard's model fetch for its runner (shard_runner.ts): starts the
 * agent's fetch (model_fetcher.ts) in the background, so a download of many
 * minutes never holds up the supervisor's reconcile or ticks, turns its end
 * into the machine's `model_ready` or `model_failed` event, stops it when
 * the shard is stopped, and keeps what the report and the cold-start
 * receipt show of it.
 *
 * @module
 */
import type { ShardDownload } from "../protocol/shard_download.ts";
import type { DownloadReceipt } from "../protocol/cold_start_receipt.ts";
import type { Clock } from "../time/clock.ts";
import { errorMessage } from "../text/error_message.ts";
import { type ModelFetcher, ModelFetchError } from "./model_fetcher.ts";
import type { ShardAction, ShardMachineState } from "./shard_machine.ts";
import type { ReceiptRecorder } from "./cold_start_receipt.ts";
import type { ShardLaunch } from "../engines/types.ts";
import type { DesiredShard, SupervisorEvent } from "./types.ts";

/** The event a finished fetch feeds the machine. */
export type FetchOutcome =
  | { type: "model_ready"; path: string }
  | { type: "model_failed"; reason: string; retryable: boolean; kind?: string };

/** The model fetch of one shard. */
export class ShardModel {
  readonly #fetcher: ModelFetcher;
  readonly #shard: DesiredShard;
  readonly #clock: Clock;
  readonly #emit: (e: Omit<SupervisorEvent, "at">) => void;
  #abort: AbortController | null = null;
  /** When the first try began; null before. */
  #began: number | null = null;
  /** What the fetch took, once done; handed to the next spawn's receipt once. */
  #receipt: DownloadReceipt | null = null;

  /** A fetch of `shard`'s model through `fetcher`, timed on `clock`, telling `emit` of retries. */
  constructor(
    fetcher: ModelFetcher,
    shard: DesiredShard,
    clock: Clock,
    emit: (e: Omit<SupervisorEvent, "at">) => void,
  ) {
    this.#fetcher = fetcher;
    this.#shard = shard;
    this.#clock = clock;
    this.#emit = emit;
  }

  /** Carries out the machine's fetch actions: a try, its stop, or telling why the last one failed. */
  act(
    action: Extract<ShardAction, { type: "fetch_model" | "fetch_retry" | "fetch_stop" }>,
    done: (outcome: FetchOutcome) => void,
  ): void {
    if (action.type === "fetch_model") this.start(done);
    else if (action.type === "fetch_stop") this.abort();
    else this.#emit({ shard: this.#shard.id, kind: "download", message: action.message });
  }

  /** Starts a try; `done` receives its outcome unless {@link abort} came first. */
  start(done: (outcome: FetchOutcome) => void): void {
    this.#abort?.abort();
    const abort = new AbortController();
    this.#abort = abort;
    this.#began ??= this.#clock.now();
    const began = this.#began;
    this.#fetcher.fetch(this.#shard, abort.signal).then(
      (model) => {
        if (abort.signal.aborted) return;
        this.#abort = null;
        const seconds = (this.#clock.now() - began) / 1000;
        this.#receipt = model.sources === undefined || model.sources.length === 0
          ? { seconds, bytes: model.bytes }
          : { seconds, bytes: model.bytes, sources: model.sources.map((s) => ({ ...s })) };
        done({ type: "model_ready", path: model.path });
      },
      (e) => {
        if (abort.signal.aborted) return;
        this.#abort = null;
        const retryable = e instanceof ModelFetchError ? e.retryable : true;
        const kind = e instanceof ModelFetchError ? e.kind : null;
        const failed = { type: "model_failed" as const, reason: errorMessage(e), retryable };
        done(kind === null ? failed : { ...failed, kind });
      },
    );
  }

  /** Stops a try under way; its outcome is never fed. */
  abort(): void {
    this.#abort?.abort();
    this.#abort = null;
  }

  /** A run was spawned: its receipt gets the download that preceded it (a restart's none). */
  spawned(recorder: ReceiptRecorder): void {
    if (this.#receipt !== null) recorder.downloaded(this.#receipt);
    this.#receipt = null;
  }

  /** What the shard's report shows while it is `downloading`; null in any other state. */
  report(m: ShardMachineState): ShardDownload | null {
    if (m.state !== "downloading") return null;
    const p = this.#fetcher.progress(this.#shard);
    return {
      model: p?.model ?? this.#shard.launch.model,
      commit: p?.commit ?? null,
      bytes_done: p?.bytes_done ?? 0,
      bytes_total: p?.bytes_total ?? 0,
      rate_bytes_per_second: m.fetching ? p?.rate_bytes_per_second ?? 0 : 0,
      eta_seconds: m.fetching ? p?.eta_seconds ?? null : null,
      sources: m.fetching ? [...(p?.sources ?? [])] : [],
      last_error: m.fetchError,
      failures: m.fetchFailures,
    };
  }
}

/** The launch a plugin sees: with this host's copy of the model (`model_path`) once fetched. */
export function withModelPath(launch: ShardLaunch, path: string | null): ShardLaunch {
  return path === null ? launch : { ...launch, model_path: path };
}
