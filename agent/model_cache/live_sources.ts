/**
 * The sources of one snapshot's download, shared by its files: the
 * assignment read again for every try of a chunk (source_order.ts decides
 * which source; this holds what the download remembers between chunks:
 * each failed source's backoff, on an injected clock). A source that fails
 * is backed off once for every file, so one hub outage is one
 * `source_changed` event, not one per file; a re-plan that puts another
 * source first is one event too, told by the first chunk that sees it, and
 * so is a source taking its place again once its backoff ended.
 *
 * @module
 */
import type { ByteSource } from "../../models/byte_source.ts";
import type { BackoffPolicy } from "../../supervisor/backoff.ts";
import { type Clock, systemClock } from "../../time/clock.ts";
import {
  afterFailure,
  afterMismatch,
  afterPick,
  afterRelease,
  afterSuccess,
  keepAssigned,
  nextSource,
  type Refusals,
  SOURCE_BACKOFF,
  type SourceHealth,
  sourceOrder,
} from "./source_order.ts";

/**
 * The sources of a download: a fixed list, or a function answering the
 * current assignment (called for every try of a chunk: keep it cheap).
 */
export type SourceList = readonly ByteSource[] | (() => readonly ByteSource[]);

/** The source asked first before and after a change. */
export interface HeadChange {
  /** Its name before. */
  from: string;
  /** Its name now. */
  to: string;
}

/** A change of the source asked first that no failure made. */
export interface Reassigned extends HeadChange {
  /** `assignment`: the plan changed; `recovered`: `to`'s backoff ended, or it served again. */
  cause: "assignment" | "recovered";
}

/** One download's view of its sources. */
export class LiveSources {
  readonly #read: () => readonly ByteSource[];
  readonly #clock: Clock;
  readonly #policy: BackoffPolicy;
  readonly #random: () => number;
  /** The sources that failed and have not served since. */
  #health: SourceHealth[] = [];
  /** The source that headed the order at the last look; null before the first. */
  #head: string | null = null;
  /** The assignment's names at the last look, to tell a re-plan from a recovery. */
  #plan: string | null = null;

  /** A view of `sources`; backoffs read `clock`, follow `policy` and are jittered by `random`. */
  constructor(
    sources: SourceList,
    clock: Clock = systemClock,
    policy = SOURCE_BACKOFF,
    random: () => number = Math.random,
  ) {
    this.#read = typeof sources === "function" ? sources : () => sources;
    this.#clock = clock;
    this.#policy = policy;
    this.#random = random;
  }

  /** The sources in the order to ask them now. */
  order(): ByteSource[] {
    const assigned = this.#read();
    this.#health = keepAssigned(assigned, this.#health);
    return sourceOrder(assigned, this.#health, this.#clock.now());
  }

  /**
   * The source for the next try of a chunk (undefined when none is
   * assigned or every one refused the file), skipping `refused` and asking
   * the `demoted` last; how many are assigned; when the try begins (for
   * {@link failed}, {@link succeeded}, {@link released}); and the change of
   * the order's head since the last look when no failure made it (null
   * when none did).
   */
  look(refused: Refusals, demoted?: ReadonlySet<string>): {
    source: ByteSource | undefined;
    assigned: number;
    reassigned: Reassigned | null;
    at: number;
  } {
    const assigned = this.#read();
    const now = this.#clock.now();
    this.#health = keepAssigned(assigned, this.#health);
    const head = this.#headOf(assigned, now);
    const plan = assigned.map((s) => s.name).join("\n");
    const [was, wasPlan] = [this.#head, this.#plan];
    this.#head = head;
    this.#plan = plan;
    const reassigned = was !== null && head !== null && head !== was
      ? {
        from: was,
        to: head,
        cause: plan === wasPlan ? "recovered" as const : "assignment" as const,
      }
      : null;
    const source = nextSource(assigned, this.#health, now, refused, demoted);
    if (source !== undefined) this.#health = afterPick(this.#health, source.name, now);
    return { source, assigned: assigned.length, reassigned, at: now };
  }

  /** The source the next look would answer, without looking (no change is told, no probe begun). */
  peek(refused: Refusals, demoted?: ReadonlySet<string>): ByteSource | undefined {
    return nextSource(this.#read(), this.#health, this.#clock.now(), refused, demoted);
  }

  /**
   * `source` failed a try begun at `startedAt`: it is backed off (unless
   * that outage was counted); answers the change of head, if any.
   */
  failed(source: ByteSource, startedAt: number): HeadChange | null {
    const assigned = this.#read();
    const now = this.#clock.now();
    const before = this.#headOf(assigned, now);
    this.#health = afterFailure(
      assigned,
      this.#health,
      source.name,
      startedAt,
      now,
      this.#policy,
      this.#random,
    );
    const head = this.#headOf(assigned, now);
    if (before !== source.name || head === null || head === source.name) return null;
    // Told here, so the next look does not tell it again as a re-plan.
    this.#head = head;
    return { from: source.name, to: head };
  }

  /** `source` served a try begun at `startedAt`: begun after its last failure, it is healthy again. */
  succeeded(source: ByteSource, startedAt: number): void {
    this.#health = afterSuccess(this.#health, source.name, startedAt);
  }

  /** A try on `source` begun at `startedAt` ended with no word on it (refused the file, stopped). */
  released(source: ByteSource, startedAt: number): void {
    this.#health = afterRelease(this.#health, source.name, startedAt);
  }

  /** A file's content did not match: the sources that `served` it count a failure each. */
  blame(served: ReadonlySet<string>): void {
    const assigned = this.#read();
    const now = this.#clock.now();
    this.#health = afterMismatch(
      assigned,
      this.#health,
      served,
      now,
      this.#policy,
      this.#random,
    );
    this.#head = this.#headOf(assigned, now);
  }

  #headOf(assigned: readonly ByteSource[], now: number): string | null {
    return sourceOrder(assigned, this.#health, now, undefined, true)[0]?.name ?? null;
  }
}
