/**
 * The gateway's table of ready endpoints (design §12): where traffic for each
 * served model may go, with per-endpoint outstanding-request counters and a
 * "suspect" mark, and each model's pick by its deployment's routing policy:
 * least outstanding of two random choices (the default), prefix affinity
 * (consistent hashing with bounded loads over the request's affinity key,
 * gateway/bounded_ring.ts, gateway/affinity_key.ts), or random.
 *
 * Only endpoints the control plane reports READY enter the table (design §1.1
 * rule 5: traffic goes only to a replica whose weights are loaded); the table
 * never adds an endpoint on its own.
 *
 * Suspect rule: the proxy marks an endpoint suspect when a connection to it
 * fails or its response dies mid-stream. While marked, {@link EndpointTable.choose}
 * skips it as long as the model has a non-suspect endpoint (so a model with a
 * single endpoint keeps being served). The mark is cleared only by
 * {@link EndpointTable.setEndpoints}: a fresh list from the control plane that
 * still contains the endpoint at least `suspectMs` (default 10 s) after it was
 * marked. An endpoint that leaves the list is dropped with its mark; if it
 * comes back, it comes back clean.
 *
 * @module
 */

import { HashRing, pickBounded } from "./bounded_ring.ts";
import { effectiveLoad, type EngineLoad } from "./load.ts";
import type { RoutingPolicy } from "../deployment/schema.ts";
import type { EndpointSpec } from "../protocol/gateway_protocol.ts";
import { systemClock } from "../time/clock.ts";

// The contract is protocol/'s; the gateway's modules name it from here.
export type { EndpointSpec };

/** An endpoint in the table, with its live counters. */
export interface Endpoint extends EndpointSpec {
  /** Identity across table updates: replica id, URL and shard. */
  readonly key: string;
  /** Requests dispatched and not yet finished. */
  outstanding: number;
  /** Requests dispatched in total (for tests and metrics). */
  dispatched: number;
  /** When it was marked suspect (ms since epoch), or null. */
  suspectSince: number | null;
  /** The engine's own last load reading (gateway/engine_load.ts), or null. */
  engineLoad: EngineLoad | null;
}

/** A uniform random number in [0, 1), like `Math.random`. */
export type RandomSource = () => number;

/** Settings of {@link EndpointTable}. */
export interface EndpointTableOptions {
  /** Random source for the two choices (tests inject a deterministic one). */
  random?: RandomSource;
  /** Clock in ms (tests inject one). */
  now?: () => number;
  /** How long a suspect mark lasts at least, in ms (default 10 000). */
  suspectMs?: number;
}

/** Whether two sorted key lists are equal. */
function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((k, i) => k === b[i]);
}

/** The identity of an endpoint across updates. */
export function endpointKey(e: EndpointSpec): string {
  return `${e.replica_id} ${e.url} ${e.shard ?? ""}`;
}

/**
 * Least outstanding with power of two choices (design §12), pure: draws two
 * distinct candidates at random and returns the one with fewer outstanding
 * requests (the first drawn on a tie). One candidate is returned as is; none
 * gives null.
 */
export function pickTwoChoices<T extends { outstanding: number }>(
  candidates: readonly T[],
  random: RandomSource,
  load: (t: T) => number = (t) => t.outstanding,
): T | null {
  const n = candidates.length;
  if (n === 0) return null;
  if (n === 1) return candidates[0];
  const i = Math.min(n - 1, Math.floor(random() * n));
  let j = Math.min(n - 2, Math.floor(random() * (n - 1)));
  if (j >= i) j++;
  const a = candidates[i];
  const b = candidates[j];
  return load(b) < load(a) ? b : a;
}

/** The in-memory endpoint table (design §12). */
export class EndpointTable {
  #byModel = new Map<string, Endpoint[]>();
  #models = new Set<string>();
  #loaded = false;
  #rings = new Map<string, HashRing>();
  #routing = new Map<string, RoutingPolicy>();
  readonly #random: RandomSource;
  readonly #now: () => number;
  readonly #suspectMs: number;

  /** Creates an empty table. */
  constructor(options: EndpointTableOptions = {}) {
    this.#random = options.random ?? Math.random;
    this.#now = options.now ?? systemClock.now;
    this.#suspectMs = options.suspectMs ?? 10_000;
  }

  /**
   * Replaces the whole set of ready endpoints at once. Endpoints already in
   * the table (same replica id and URL) keep their counters; their suspect
   * mark is cleared when it is older than `suspectMs`. `knownModels` are the
   * served names of all deployments, ready or not: a known model with no
   * ready endpoint answers 503 rather than 404. Models of `list` are always
   * known; without `knownModels`, models known before stay known.
   */
  setEndpoints(
    list: readonly EndpointSpec[],
    knownModels?: Iterable<string>,
    routing?: Readonly<Record<string, RoutingPolicy>>,
  ): void {
    const old = new Map<string, Endpoint>();
    for (const eps of this.#byModel.values()) for (const e of eps) old.set(e.key, e);
    const now = this.#now();
    const next = new Map<string, Endpoint[]>();
    const seen = new Set<string>();
    for (const spec of list) {
      const key = endpointKey(spec);
      if (seen.has(`${spec.model}\n${key}`)) continue;
      seen.add(`${spec.model}\n${key}`);
      let e = old.get(key);
      if (e === undefined || e.model !== spec.model) {
        e = { ...spec, key, outstanding: 0, dispatched: 0, suspectSince: null, engineLoad: null };
      } else {
        // A re-registered agent's proxy has a new credential: the next request uses it.
        e.token = spec.token;
        e.load_metrics = spec.load_metrics;
        if (e.suspectSince !== null && now - e.suspectSince >= this.#suspectMs) {
          e.suspectSince = null;
        }
      }
      const eps = next.get(spec.model) ?? [];
      eps.push(e);
      next.set(spec.model, eps);
    }
    const models = knownModels === undefined ? new Set(this.#models) : new Set(knownModels);
    for (const m of next.keys()) models.add(m);
    // A model's ring depends on its set of endpoints only: rebuilt when that set changes.
    const rings = new Map<string, HashRing>();
    for (const [model, eps] of next) {
      const keys = eps.map((e) => e.key).sort();
      const old = this.#rings.get(model);
      rings.set(
        model,
        old !== undefined && sameKeys(old.members, keys) ? old : new HashRing(keys),
      );
    }
    this.#byModel = next;
    this.#models = models;
    this.#rings = rings;
    if (routing !== undefined) this.#routing = new Map(Object.entries(routing));
    this.#loaded = true;
  }

  /**
   * The routing policy of `model`. A model the feed names no policy for
   * comes from a control plane older than routing policies: it keeps the
   * balancing it had then, least outstanding.
   */
  routing(model: string): RoutingPolicy {
    return this.#routing.get(model) ?? "least_outstanding";
  }

  /** Whether {@link EndpointTable.setEndpoints} was called at least once (the first sync). */
  get loaded(): boolean {
    return this.#loaded;
  }

  /** Whether `model` is a served name the gateway knows (ready or not). */
  isKnown(model: string): boolean {
    return this.#models.has(model);
  }

  /** Models with at least one ready endpoint, sorted. */
  readyModels(): string[] {
    return [...this.#byModel.keys()].sort();
  }

  /** The endpoints of `model` (live objects; do not mutate). */
  endpoints(model: string): readonly Endpoint[] {
    return this.#byModel.get(model) ?? [];
  }

  /** Every endpoint in the table (live objects; do not mutate). */
  all(): Endpoint[] {
    return [...this.#byModel.values()].flat();
  }

  /**
   * Picks an endpoint for `model` (design §12): among endpoints whose key is
   * not in `exclude`, the non-suspect ones if any, else the suspect ones;
   * then by the model's routing policy. Prefix affinity walks the model's
   * ring from `affinity` (gateway/affinity_key.ts) to the first endpoint
   * under the load bound; without a key it is least outstanding. Does not
   * count the request: call {@link EndpointTable.acquire} on the result.
   */
  choose(
    model: string,
    exclude: ReadonlySet<string> = new Set(),
    affinity: string | null = null,
  ): Endpoint | null {
    const open = this.endpoints(model).filter((e) => !exclude.has(e.key));
    const healthy = open.filter((e) => e.suspectSince === null);
    const candidates = healthy.length > 0 ? healthy : open;
    const now = this.#now();
    const load = (e: Endpoint) => effectiveLoad(e, now);
    switch (this.routing(model)) {
      case "random":
        return candidates.length === 0 ? null : candidates[
          Math.min(candidates.length - 1, Math.floor(this.#random() * candidates.length))
        ];
      case "prefix_affinity": {
        const ring = this.#rings.get(model);
        if (affinity !== null && ring !== undefined) {
          return pickBounded(ring, affinity, new Map(candidates.map((e) => [e.key, e])), load);
        }
        return pickTwoChoices(candidates, this.#random, load);
      }
      default:
        return pickTwoChoices(candidates, this.#random, load);
    }
  }

  /** Counts a request dispatched to `e`; returns a release function that is safe to call twice. */
  acquire(e: Endpoint): () => void {
    e.outstanding++;
    e.dispatched++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      e.outstanding--;
    };
  }

  /** Marks `e` suspect (a failed connection or a response that died mid-stream). */
  markSuspect(e: Endpoint): void {
    e.suspectSince = this.#now();
  }
}
