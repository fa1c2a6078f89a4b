/**
 * A `fetch` over a list of control-plane URLs (issue #15): agents, gateways
 * and the CLI address the first URL, and this sends each request to the one
 * in use, moving to the next on a connection failure or on a refusal that
 * says "not here" (`503` with a code in {@link FAILOVER_CODES}). It stays on
 * the URL that answered, so a failover costs one extra attempt, once; and
 * when a follower's answer names the leader (`x-llmgw-leader`) and the
 * leader is listed, it moves there, so clients talk to the leader directly
 * and forwarding is only the way through a failover.
 *
 * A request that timed out (its signal aborted) is not sent again, since the
 * caller gave up; the next request starts at the next URL, which is what
 * moves a client off a frozen control plane that accepts connections but
 * never answers.
 *
 * Bodies are buffered so a request can be sent again; control-plane
 * requests are small JSON.
 *
 * @module
 */
import { errorCode, FAILOVER_CODES, LEADER_HEADER } from "../protocol/leadership.ts";

/** The `fetch` signature this wraps and provides. */
export type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Raised for a URL list that cannot be used. */
export class ControlUrlError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "ControlUrlError";
  }
}

/**
 * Splits a comma-separated list (flags, environment) into URLs, each
 * checked to be http(s).
 *
 * @throws {ControlUrlError} Naming the entry that is not an http(s) URL.
 */
export function parseControlUrls(values: readonly string[], what: string): string[] {
  const urls = values.flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v !== "");
  for (const u of urls) {
    let parsed: URL;
    try {
      parsed = new URL(u);
    } catch {
      throw new ControlUrlError(`${what}: "${u}" is not a URL`);
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new ControlUrlError(`${what}: "${u}" is not an http(s) URL`);
    }
  }
  return urls;
}

/** A base URL with exactly one trailing slash, for prefix matching. */
function base(url: string): string {
  const u = new URL(url);
  u.search = "";
  u.hash = "";
  return u.href.endsWith("/") ? u.href : `${u.href}/`;
}

/** Settings of a {@link FailoverFetch}. */
export interface FailoverOptions {
  /**
   * How long a read (GET or HEAD) may wait for one control plane before it
   * is sent to the next (ms): for a one-shot client like the CLI, so one
   * frozen instance first in the list does not fail every command. Never
   * for other methods (they might have been acted on), nor for long polls.
   * Default: none.
   */
  readAttemptTimeoutMs?: number;
}

/** Sends requests to one of several control planes. */
export class FailoverFetch {
  readonly #bases: string[];
  readonly #inner: Fetch;
  readonly #log: (line: string) => void;
  readonly #attemptTimeoutMs: number | null;
  #current = 0;

  /**
   * @param urls The control planes, in order of preference; requests address `urls[0]`.
   * @param inner The fetch that sends (TLS trust lives there).
   * @param log Told when the URL in use changes.
   */
  constructor(
    urls: readonly string[],
    inner: Fetch = fetch,
    log: (line: string) => void = () => {},
    options: FailoverOptions = {},
  ) {
    if (urls.length === 0) throw new ControlUrlError("no control-plane URL");
    this.#bases = urls.map(base);
    this.#inner = inner;
    this.#log = log;
    this.#attemptTimeoutMs = options.readAttemptTimeoutMs ?? null;
  }

  /** The URL in use. */
  get current(): string {
    return this.#bases[this.#current].replace(/\/$/, "");
  }

  /** Every URL, in order. */
  get urls(): string[] {
    return this.#bases.map((b) => b.replace(/\/$/, ""));
  }

  /** The fetch: requests to any listed URL go to the one in use; others pass through. */
  readonly fetch: Fetch = async (input, init) => {
    const target = input instanceof Request ? input.url : String(input);
    const rest = this.#relative(target);
    if (rest === null) return this.#inner(input, init);
    const request = input instanceof Request ? input : null;
    const method = init?.method ?? request?.method ?? "GET";
    const headers = new Headers(init?.headers ?? request?.headers);
    const signal = init?.signal ?? request?.signal ?? undefined;
    const body = await bufferedBody(init?.body ?? request?.body ?? null);
    const n = this.#bases.length;
    let lastError: unknown = null;
    let lastRefusal: Response | null = null;
    for (let i = 0; i < n; i++) {
      const index = (this.#current + i) % n;
      const url = this.#bases[index] + rest;
      let res: Response;
      const read = method === "GET" || method === "HEAD";
      const patience = read && n > 1 && this.#attemptTimeoutMs !== null
        ? AbortSignal.timeout(this.#attemptTimeoutMs)
        : null;
      try {
        const attemptSignal = patience === null
          ? signal
          : signal === undefined || signal === null
          ? patience
          : AbortSignal.any([signal, patience]);
        res = await this.#inner(url, { ...init, method, headers, body, signal: attemptSignal });
      } catch (e) {
        if (patience?.aborted && !signal?.aborted) {
          lastError = e;
          continue;
        }
        if (signal?.aborted) {
          // The caller gave up on this one: the next request tries the next URL.
          if (n > 1) this.#use((index + 1) % n, "it did not answer in time");
          throw e;
        }
        lastError = e;
        continue;
      }
      if (n > 1 && res.status === 503 && await refusesHere(res)) {
        await lastRefusal?.body?.cancel().catch(() => {});
        lastRefusal = res;
        continue;
      }
      if (index !== this.#current) this.#use(index, "the previous one did not serve");
      await lastRefusal?.body?.cancel().catch(() => {});
      // A follower forwarded this: talk to the leader itself next time, when it is listed.
      const leader = this.#indexOf(res.headers.get(LEADER_HEADER));
      if (leader !== null) this.#use(leader, "it leads");
      return res;
    }
    if (lastRefusal !== null) return lastRefusal;
    throw lastError;
  };

  #use(index: number, why: string): void {
    if (index === this.#current) return;
    this.#current = index;
    this.#log(`control plane: now using ${this.current} (${why})`);
  }

  /** The index of the listed URL with `url`'s origin, or null. */
  #indexOf(url: string | null): number | null {
    if (url === null) return null;
    try {
      const origin = new URL(url).origin;
      const i = this.#bases.findIndex((b) => new URL(b).origin === origin);
      return i === -1 ? null : i;
    } catch {
      return null;
    }
  }

  /** The part of `url` after a listed base, or null when it is under none. */
  #relative(url: string): string | null {
    for (const b of this.#bases) {
      if (url.startsWith(b)) return url.slice(b.length);
      if (url === b.slice(0, -1)) return "";
    }
    return null;
  }
}

/** Whether a 503 is a control plane saying "not here" (it reads a copy of the body). */
async function refusesHere(res: Response): Promise<boolean> {
  try {
    return FAILOVER_CODES.includes(errorCode(await res.clone().json()) ?? "");
  } catch {
    return false;
  }
}

/** A body that can be sent more than once. */
async function bufferedBody(body: BodyInit | null): Promise<BodyInit | undefined> {
  if (body === null || body === undefined) return undefined;
  if (typeof body === "string" || body instanceof ArrayBuffer || body instanceof Uint8Array) {
    return body;
  }
  return await new Response(body).arrayBuffer();
}
