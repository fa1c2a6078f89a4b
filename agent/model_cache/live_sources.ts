/**
 * The sources of one snapshot's download, shared by its files: the
 * assignment read again for every try of a chunk (source_order.ts decides
 * which source; this holds what the download remembers between chunks).
 * A source that fails moves last once for every file, so one hub outage is
 * one `source_changed` event, not one per file; a re-plan that puts another
 * source first is one event too, told by the first chunk that sees it.
 *
 * @module
 */
import type { ByteSource } from "../../models/byte_source.ts";
import {
  afterFailure,
  afterMismatch,
  keepAssigned,
  nextSource,
  type Refusals,
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

/** One download's view of its sources. */
export class LiveSources {
  readonly #read: () => readonly ByteSource[];
  /** Names of the sources that failed, oldest failure first. */
  #failed: string[] = [];
  /** The source that headed the order at the last look; null before the first. */
  #head: string | null = null;

  /** A view of `sources`. */
  constructor(sources: SourceList) {
    this.#read = typeof sources === "function" ? sources : () => sources;
  }

  /** The sources in the order to ask them now. */
  order(): ByteSource[] {
    const assigned = this.#read();
    this.#failed = keepAssigned(assigned, this.#failed);
    return sourceOrder(assigned, this.#failed);
  }

  /**
   * The source for the next try of a chunk (undefined when none is
   * assigned or every one refused the file), how many are assigned, and the
   * change of the order's head since the last look when the assignment, not
   * a failure, made it (null when none did).
   */
  look(refused: Refusals): {
    source: ByteSource | undefined;
    assigned: number;
    reassigned: HeadChange | null;
  } {
    const assigned = this.#read();
    this.#failed = keepAssigned(assigned, this.#failed);
    const head = this.#headOf(assigned);
    const was = this.#head;
    this.#head = head;
    const reassigned = was !== null && head !== null && head !== was
      ? { from: was, to: head }
      : null;
    const source = nextSource(assigned, this.#failed, refused);
    return { source, assigned: assigned.length, reassigned };
  }

  /** The source the next look would answer, without looking (no change is told). */
  peek(refused: Refusals): ByteSource | undefined {
    return nextSource(this.#read(), this.#failed, refused);
  }

  /** `source` failed a try: it goes last if it heads the order; answers the change of head, if any. */
  failed(source: ByteSource): HeadChange | null {
    const assigned = this.#read();
    const before = this.#headOf(assigned);
    this.#failed = afterFailure(assigned, this.#failed, source.name);
    const head = this.#headOf(assigned);
    if (before !== source.name || head === null || head === source.name) return null;
    // Told here, so the next look does not tell it again as a re-plan.
    this.#head = head;
    return { from: source.name, to: head };
  }

  /** A file's content did not match: the sources that `served` it go last. */
  blame(served: ReadonlySet<string>): void {
    const assigned = this.#read();
    this.#failed = afterMismatch(assigned, this.#failed, served);
    this.#head = this.#headOf(assigned);
  }

  #headOf(assigned: readonly ByteSource[]): string | null {
    return sourceOrder(assigned, this.#failed)[0]?.name ?? null;
  }
}
