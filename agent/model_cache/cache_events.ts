/**
 * What the model cache tells the agent while it works: one typed event per
 * step that an operator would want in the event log (a download started,
 * a source failed or was replaced, a file verified or rejected, the
 * snapshot complete or failed), never one per percent. Source names are
 * the sources' own, which never hold a token (see ByteSource).
 *
 * @module
 */

/** Which download an event is about. */
export interface EventSubject {
  /** The hub id. */
  repo: string;
  /** The commit. */
  commit: string;
}

/** Which file of it. */
export interface FileSubject extends EventSubject {
  /** The file's path in the repository. */
  file: string;
}

/** Every event the model cache emits. */
export type CacheEvent =
  | EventSubject & {
    kind: "started";
    /** Files still to fetch. */
    files: number;
    /** Bytes still to fetch. */
    bytes: number;
  }
  | FileSubject & {
    kind: "chunk_failed";
    source: string;
    /** Range asked for, `start-end` (end exclusive). */
    range: string;
    attempt: number;
    error: string;
  }
  | FileSubject & {
    kind: "source_changed";
    from: string;
    to: string;
    /**
     * `failure`: `from` failed (a warning); `assignment`: the control
     * plane's plan put `to` first while the download ran (issue #25 item 3);
     * `recovered`: `to` failed earlier and its backoff ended, so it is asked
     * first again (source_order.ts).
     */
    cause: "failure" | "assignment" | "recovered";
    reason: string;
  }
  | FileSubject & { kind: "verified"; bytes: number }
  | FileSubject & {
    kind: "mismatch";
    /** The sources that served the rejected bytes. */
    sources: string[];
    want: string;
    got: string;
  }
  | EventSubject & { kind: "completed"; bytes: number; path: string }
  | EventSubject & { kind: "failed"; file?: string; error: string }
  | EventSubject & {
    kind: "evicted";
    /** Bytes the eviction freed (blobs no other revision links). */
    bytes: number;
    /** Why: the disk went over the high watermark. */
    reason: string;
  };

/** Receives events; must not throw (an error in it is ignored). */
export type CacheEventSink = (event: CacheEvent) => void;

/** Calls `sink`, never letting its error break a download. */
export function emit(sink: CacheEventSink | undefined, event: CacheEvent): void {
  try {
    sink?.(event);
  } catch {
    // An observer's bug must not fail a download.
  }
}
