/**
 * What the fake hub was asked: requests and body bytes by kind (the
 * revision API, `resolve`, the CDN) and by caller (the `User-Agent`), and how
 * many CDN requests carried an `Authorization` header, which must stay 0: the
 * token belongs to the hub's own origin only.
 *
 * @module
 */

/** Which listener and route answered. */
export type RequestKind = "api" | "resolve" | "cdn";

/** Requests and body bytes. */
export interface Tally {
  /** Requests answered (errors too). */
  requests: number;
  /** Body bytes sent. */
  bytes: number;
}

/** A copy of the counters at one moment. */
export interface CountersSnapshot {
  /** By kind. */
  byKind: Record<RequestKind, Tally>;
  /** By `User-Agent` (`-` when none). */
  byCaller: Record<string, Tally>;
  /** CDN requests that carried `Authorization` (must stay 0). */
  cdnRequestsWithAuthorization: number;
  /** Every byte sent, hub and CDN. */
  totalBytes: number;
}

/** The counters of one fake hub. */
export class FakeHubCounters {
  #byKind: Record<RequestKind, Tally> = this.#empty();
  #byCaller = new Map<string, Tally>();
  #cdnWithAuthorization = 0;

  #empty(): Record<RequestKind, Tally> {
    return {
      api: { requests: 0, bytes: 0 },
      resolve: { requests: 0, bytes: 0 },
      cdn: { requests: 0, bytes: 0 },
    };
  }

  #caller(caller: string): Tally {
    let tally = this.#byCaller.get(caller);
    if (tally === undefined) this.#byCaller.set(caller, tally = { requests: 0, bytes: 0 });
    return tally;
  }

  /** Counts one request. */
  request(kind: RequestKind, caller: string, withAuthorization: boolean): void {
    this.#byKind[kind].requests++;
    this.#caller(caller).requests++;
    if (kind === "cdn" && withAuthorization) this.#cdnWithAuthorization++;
  }

  /** Counts body bytes sent. */
  sent(kind: RequestKind, caller: string, bytes: number): void {
    this.#byKind[kind].bytes += bytes;
    this.#caller(caller).bytes += bytes;
  }

  /** A copy, safe to keep. */
  snapshot(): CountersSnapshot {
    const byKind = structuredClone(this.#byKind);
    return {
      byKind,
      byCaller: Object.fromEntries([...this.#byCaller].map(([k, v]) => [k, { ...v }])),
      cdnRequestsWithAuthorization: this.#cdnWithAuthorization,
      totalBytes: byKind.api.bytes + byKind.resolve.bytes + byKind.cdn.bytes,
    };
  }

  /** Back to zero. */
  reset(): void {
    this.#byKind = this.#empty();
    this.#byCaller.clear();
    this.#cdnWithAuthorization = 0;
  }
}
