/**
 * Consistent hashing with bounded loads (design §12, issue #16), pure: the
 * prefix-affinity pick. Each replica owns points on a hash ring; a request's
 * affinity key hashes to a point, and the first replica clockwise whose
 * in-flight count is under the bound takes it, so a conversation keeps
 * returning to the replica that holds its KV cache until that replica is
 * busier than its share.
 *
 * - **The bound** is max(1.25 × mean, mean + 2), the mean counting the new
 *   request. KubeAI's plain 1.25 × mean (after Mirrokni et al.) spills at
 *   small in-flight counts (a mean of 1 allows 1.25: every second request
 *   moves); the additive term keeps a replica's own sessions on it at low load.
 * - **The ring is a function of the member keys alone**, so every gateway
 *   fed the same ready set builds the same ring and sends a key to the same
 *   replica, with no shared state; a gateway restart changes nothing.
 * - **Members joining or leaving move only their own share of keys**: a key
 *   goes to another replica only when its own replica left, or a new one
 *   took points in front of it.
 *
 * @module
 */

/** Points each member puts on the ring: enough for an even share at a handful of replicas. */
export const VIRTUAL_NODES = 160;

/**
 * 32-bit FNV-1a over UTF-16 code units, then a murmur3 finalizer so that
 * near-identical inputs (`r1#0`, `r1#1`) land far apart. Not cryptographic:
 * a ring point or an affinity key needs spread, not secrecy.
 */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The in-flight bound of bounded-load hashing: max(1.25 × mean, mean + 2), the new request counted. */
export function loadBound(totalInFlight: number, members: number): number {
  if (members <= 0) return 0;
  const mean = (totalInFlight + 1) / members;
  return Math.max(1.25 * mean, mean + 2);
}

/** A hash ring over member keys. */
export class HashRing {
  readonly #points: Uint32Array;
  readonly #owners: Int32Array;
  readonly #members: readonly string[];

  /** Builds the ring; the order of `members` does not matter. */
  constructor(members: readonly string[], virtualNodes = VIRTUAL_NODES) {
    const unique = [...new Set(members)].sort();
    const entries: [number, number][] = [];
    unique.forEach((m, i) => {
      for (let v = 0; v < virtualNodes; v++) entries.push([hash32(`${m}#${v}`), i]);
    });
    // Ties (two members on one point) go to the smaller key, the same on every gateway.
    entries.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    this.#points = Uint32Array.from(entries, (e) => e[0]);
    this.#owners = Int32Array.from(entries, (e) => e[1]);
    this.#members = unique;
  }

  /** The members, sorted. */
  get members(): readonly string[] {
    return this.#members;
  }

  /** Every member once, in ring order from the point of `key` clockwise. */
  *walk(key: string): Generator<string> {
    const n = this.#points.length;
    if (n === 0) return;
    const h = hash32(key);
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#points[mid] < h) lo = mid + 1;
      else hi = mid;
    }
    const seen = new Set<number>();
    for (let i = 0; i < n && seen.size < this.#members.length; i++) {
      const owner = this.#owners[(lo + i) % n];
      if (seen.has(owner)) continue;
      seen.add(owner);
      yield this.#members[owner];
    }
  }

  /** The member a key maps to with no load bound (its "home"). */
  home(key: string): string | null {
    for (const m of this.walk(key)) return m;
    return null;
  }
}

/**
 * The bounded-load pick: walks the ring from `key` and returns the first
 * candidate whose load is under {@link loadBound} over all `candidates`;
 * members of the ring that are not candidates (suspect, or already tried)
 * are passed over. Null when there is no candidate.
 */
export function pickBounded<T>(
  ring: HashRing,
  key: string,
  candidates: ReadonlyMap<string, T>,
  load: (t: T) => number,
): T | null {
  if (candidates.size === 0) return null;
  let total = 0;
  for (const c of candidates.values()) total += load(c);
  const bound = loadBound(total, candidates.size);
  for (const m of ring.walk(key)) {
    const c = candidates.get(m);
    if (c !== undefined && load(c) < bound) return c;
  }
  // Unreachable while the ring holds every candidate (the least loaded is under the mean);
  // a candidate missing from the ring still gets a request.
  let best: T | null = null;
  for (const c of candidates.values()) if (best === null || load(c) < load(best)) best = c;
  return best;
}
