/**
 * The agent's port range (design §11.2): every port a shard opens (HTTP,
 * rendezvous, what engines bind next to them) is allocated by its agent
 * from a configured range and checked free, never derived from GPU
 * indices, so a foreign server on a port moves the shard instead of
 * answering for it.
 *
 * @module
 */

import { systemClock } from "../time/clock.ts";

/** An inclusive range of TCP ports, `from` ≤ `to`. */
export interface PortRange {
  /** The first port. */
  from: number;
  /** The last port (inclusive). */
  to: number;
}

/**
 * The default range, 20000–28999, chosen to stay clear of what else binds
 * on a GPU host:
 * - below Linux's default ephemeral range (32768–60999,
 *   `net.ipv4.ip_local_port_range`), so outgoing connections and engines'
 *   own port-0 binds never take a port between its check and its bind;
 * - above Ray's default worker ports (10002–19999, vLLM's multi-node
 *   backend) and the usual fixed ports (vLLM's and Triton's 8000, 8080,
 *   node_exporter's 9100);
 * - below torch.distributed's default 29500 and SGLang's default 30000, the
 *   ports a hand-started engine takes.
 *
 * A host whose ephemeral range was widened over it should list the range in
 * `net.ipv4.ip_local_reserved_ports`.
 */
export const DEFAULT_PORT_RANGE: Readonly<PortRange> = Object.freeze({ from: 20000, to: 28999 });

/** The lowest port a range may start at: lower ones need privileges and belong to services. */
export const MIN_PORT = 1024;

/** The largest TCP port. */
export const MAX_PORT = 65535;

/** Raised for a port range or request that cannot mean anything; the message names the field. */
export class PortRangeError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "PortRangeError";
  }
}

/** Raised when no block of the asked size is free in the range. */
export class PortRangeExhaustedError extends Error {
  /** The range searched. */
  readonly range: PortRange;
  /** How many consecutive ports were asked. */
  readonly count: number;
  /** How many owners hold ports. */
  readonly owners: number;

  /** Creates the error; `detail` says what took the range. */
  constructor(range: PortRange, owner: string, count: number, owners: number, detail: string) {
    super(
      `Cannot allocate ${count} consecutive port${count === 1 ? "" : "s"} for ${owner}: ` +
        `none free in ports ${range.from}-${range.to} (${detail})`,
    );
    this.name = "PortRangeExhaustedError";
    this.range = { ...range };
    this.count = count;
    this.owners = owners;
  }
}

/**
 * Checks a port range from configuration (agent config `ports: {from, to}`).
 *
 * @param value The parsed JSON value.
 * @param where What it is, for messages (default `ports`).
 * @throws {PortRangeError} Naming the field and what was wrong, e.g.
 *   "Cannot use ports: from 70000 is past 65535".
 */
export function validatePortRange(value: unknown, where = "ports"): PortRange {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new PortRangeError(
      `Cannot use ${where}: expected {"from": N, "to": N}, got ${show(value)}`,
    );
  }
  const raw = value as Record<string, unknown>;
  const extra = Object.keys(raw).filter((k) => k !== "from" && k !== "to");
  if (extra.length > 0) {
    throw new PortRangeError(`Cannot use ${where}: unknown field ${extra[0]} (expected from, to)`);
  }
  const port = (field: "from" | "to"): number => {
    const v = raw[field];
    if (v === undefined) throw new PortRangeError(`Cannot use ${where}: ${field} is missing`);
    if (typeof v !== "number" || !Number.isInteger(v)) {
      throw new PortRangeError(
        `Cannot use ${where}: ${field} must be a whole number, got ${show(v)}`,
      );
    }
    if (v < MIN_PORT) {
      throw new PortRangeError(
        `Cannot use ${where}: ${field} ${v} is below ${MIN_PORT} (ports below it are privileged)`,
      );
    }
    if (v > MAX_PORT) {
      throw new PortRangeError(`Cannot use ${where}: ${field} ${v} is past ${MAX_PORT}`);
    }
    return v;
  };
  const from = port("from");
  const to = port("to");
  if (from > to) {
    throw new PortRangeError(`Cannot use ${where}: from ${from} is past to ${to}`);
  }
  return { from, to };
}

/**
 * Parses a flag value `FROM-TO`, e.g. `20000-28999`.
 *
 * @throws {PortRangeError} Naming the flag and the value.
 */
export function parsePortRange(text: string, where = "--ports"): PortRange {
  const m = /^\s*(\d{1,6})\s*-\s*(\d{1,6})\s*$/.exec(text);
  if (m === null) {
    throw new PortRangeError(
      `Cannot parse ${where} ${
        show(text)
      }: expected FROM-TO, e.g. ${DEFAULT_PORT_RANGE.from}-${DEFAULT_PORT_RANGE.to}`,
    );
  }
  return validatePortRange({ from: Number(m[1]), to: Number(m[2]) }, where);
}

function show(v: unknown): string {
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

/** Whether a port can be bound now; injected so the allocator stays pure. */
export type PortCheck = (port: number) => boolean | Promise<boolean>;

/** Options of a {@link PortAllocator}. */
export interface PortAllocatorOptions {
  /** The clock for {@link PortAllocator.exclude}'s deadlines (ms; default: the system clock). */
  now?: () => number;
}

/**
 * Hands out blocks of consecutive ports from a range to owners (shards).
 * State is in memory: after an agent restart, {@link reserve} puts back what
 * the pid files recorded before anything new is allocated.
 *
 * Allocation is first fit from the bottom of the range, so a released block
 * is the first reused (each port is still checked free). Concurrent
 * allocations never overlap: each re-checks its block against the holdings
 * after its last `isFree` answer and before taking it.
 */
export class PortAllocator {
  /** The range allocations come from. */
  readonly range: Readonly<PortRange>;
  readonly #now: () => number;
  readonly #owners = new Map<string, Set<number>>();
  readonly #holder = new Map<number, string>();
  /** Port → deadline (ms) after which it may be tried again; Infinity for never. */
  readonly #excluded = new Map<number, number>();

  /**
   * Creates an allocator over `range`.
   *
   * @throws {PortRangeError} When the range is not valid.
   */
  constructor(range: PortRange = DEFAULT_PORT_RANGE, options: PortAllocatorOptions = {}) {
    this.range = Object.freeze(validatePortRange(range));
    this.#now = options.now ?? systemClock.now;
  }

  /**
   * Allocates `count` consecutive ports to `owner`: the lowest block in the
   * range of which no port is held (by anyone, `owner` included), excluded,
   * or found not free by `isFree`. The block adds to what `owner` holds.
   *
   * @throws {PortRangeError} When `owner` is empty or `count` is not a whole number from 1 to the range's size.
   * @throws {PortRangeExhaustedError} When no block fits.
   */
  async allocate(owner: string, count: number, isFree: PortCheck): Promise<number[]> {
    checkOwner(owner);
    const size = this.range.to - this.range.from + 1;
    if (!Number.isInteger(count) || count < 1 || count > size) {
      throw new PortRangeError(
        `Cannot allocate ports for ${owner}: count must be a whole number from 1 to ${size} ` +
          `(the size of ports ${this.range.from}-${this.range.to}), got ${show(count)}`,
      );
    }
    let inUse = 0;
    let start = this.range.from;
    while (start + count - 1 <= this.range.to) {
      const taken = this.#lastTaken(start, count);
      if (taken !== null) {
        start = taken + 1;
        continue;
      }
      let busy: number | null = null;
      for (let port = start; port < start + count; port++) {
        if (!(await isFree(port))) {
          busy = port;
          break;
        }
      }
      if (busy !== null) {
        inUse++;
        start = busy + 1;
        continue;
      }
      // isFree may have yielded: another allocation or a reserve may have taken part of it.
      if (this.#lastTaken(start, count) !== null) continue;
      const block = Array.from({ length: count }, (_, i) => start + i);
      this.#take(owner, block);
      return block;
    }
    const held = this.#holder.size;
    const excluded = [...this.#excluded.keys()].filter((p) => this.#isExcluded(p)).length;
    throw new PortRangeExhaustedError(
      this.range,
      owner,
      count,
      this.#owners.size,
      `${this.#owners.size} owner${this.#owners.size === 1 ? " holds" : "s hold"} ${held}, ` +
        `${excluded} excluded, ${inUse} found in use`,
    );
  }

  /**
   * Records ports `owner` already uses, as read back from its pid file after
   * an agent restart. They may lie outside the range (the range changed
   * while the engine kept running) and are not checked free: the engine
   * holds them, and ownership is checked on the socket itself.
   *
   * @throws {PortRangeError} When a port is not a TCP port or another owner holds it.
   */
  reserve(owner: string, ports: readonly number[]): void {
    checkOwner(owner);
    for (const port of ports) {
      if (!Number.isInteger(port) || port < 1 || port > MAX_PORT) {
        throw new PortRangeError(
          `Cannot reserve ports for ${owner}: ${show(port)} is not a TCP port (1-${MAX_PORT})`,
        );
      }
      const other = this.#holder.get(port);
      if (other !== undefined && other !== owner) {
        throw new PortRangeError(`Cannot reserve port ${port} for ${owner}: ${other} holds it`);
      }
    }
    this.#take(owner, ports);
  }

  /** Frees every port `owner` holds and returns them (ascending); none for an unknown owner. */
  release(owner: string): number[] {
    const ports = this.#owners.get(owner);
    if (ports === undefined) return [];
    this.#owners.delete(owner);
    for (const port of ports) this.#holder.delete(port);
    return [...ports].sort((a, b) => a - b);
  }

  /** Who holds what: owner → its ports, ascending (a copy). */
  held(): Map<string, number[]> {
    return new Map(
      [...this.#owners].map(([owner, ports]) => [owner, [...ports].sort((a, b) => a - b)]),
    );
  }

  /**
   * Skips `port` in later allocations, until `until` (ms, on the
   * allocator's clock) or for good: for a port found held by a foreign
   * process, so the shard's next allocation moves past it even if the
   * holder lets go for a moment. Does not take it from an owner holding it.
   *
   * @throws {PortRangeError} When `port` is not a TCP port.
   */
  exclude(port: number, until = Infinity): void {
    if (!Number.isInteger(port) || port < 1 || port > MAX_PORT) {
      throw new PortRangeError(`Cannot exclude port ${show(port)}: not a TCP port (1-${MAX_PORT})`);
    }
    this.#excluded.set(port, Math.max(until, this.#excluded.get(port) ?? -Infinity));
  }

  #isExcluded(port: number): boolean {
    const until = this.#excluded.get(port);
    if (until === undefined) return false;
    if (until > this.#now()) return true;
    this.#excluded.delete(port);
    return false;
  }

  /** The highest held or excluded port of a block, or null when the block is open. */
  #lastTaken(start: number, count: number): number | null {
    for (let port = start + count - 1; port >= start; port--) {
      if (this.#holder.has(port) || this.#isExcluded(port)) return port;
    }
    return null;
  }

  #take(owner: string, ports: readonly number[]): void {
    let mine = this.#owners.get(owner);
    if (mine === undefined) this.#owners.set(owner, mine = new Set());
    for (const port of ports) {
      mine.add(port);
      this.#holder.set(port, owner);
    }
  }
}

function checkOwner(owner: string): void {
  if (typeof owner !== "string" || owner === "") {
    throw new PortRangeError(`Cannot allocate ports: owner is empty`);
  }
}

/**
 * Whether `port` is free for an engine: binding it succeeds on 0.0.0.0, on
 * 127.0.0.1 and, where the host has IPv6, on `[::]` (an engine that binds
 * `::` would clash with a v6 listener a v4 probe cannot see). Each probe is
 * closed at once, one after the other, since they would clash with each
 * other. A port that cannot be bound for any other reason (no permission)
 * is not free either.
 */
export function isPortFree(port: number): boolean {
  for (const hostname of ["0.0.0.0", "127.0.0.1", "::"]) {
    let listener: Deno.TcpListener;
    try {
      listener = Deno.listen({ hostname, port, transport: "tcp" });
    } catch (e) {
      if (hostname === "::" && !(e instanceof Deno.errors.AddrInUse)) continue; // no IPv6 here
      return false;
    }
    listener.close();
  }
  return true;
}
