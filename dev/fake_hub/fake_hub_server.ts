/**
 * A fake Hugging Face Hub: the hub's listener and its CDN's (two ports, so a
 * redirect really goes to another host), or the same handlers in-process
 * (`hub.fetch`) where the socket is not the point. It has an origin
 * bandwidth cap, an offline switch (the listeners close: connection
 * refused, as from an air-gapped host) and counters.
 *
 * ```ts
 * const hub = startFakeHub({ repos: [await syntheticModel({ ... })] });
 * try { … hub.endpoint … hub.counters.snapshot() … } finally { await hub.stop(); }
 * ```
 *
 * @module
 */
import { Bandwidth } from "./fake_hub_bandwidth.ts";
import { handleCdn } from "./fake_hub_cdn.ts";
import { FakeHubCounters } from "./fake_hub_counters.ts";
import { handleHub } from "./fake_hub_routes.ts";
import { UrlSigner } from "./fake_hub_signing.ts";
import type { FakeHubState } from "./fake_hub_state.ts";
import type { FakeRepo } from "./fake_repo.ts";

/** How a fake hub is made. */
export interface FakeHubOptions {
  /** The repos it serves (more with {@link FakeHub.addRepo}). */
  repos?: FakeRepo[];
  /** Tokens of its accounts; a bearer token not listed is refused (401). */
  tokens?: string[];
  /** Where it listens (default 127.0.0.1). */
  hostname?: string;
  /** The hub's port (default 0: any free port). */
  port?: number;
  /** The CDN's port (default 0). */
  cdnPort?: number;
  /** The origin's cap in bytes per second, hub and CDN together (default none). */
  bytesPerSecond?: number;
  /** How long a signed CDN URL lives (default 600 s). */
  signedUrlTtlSeconds?: number;
  /** The clock signed URLs expire by (ms since the epoch; default `Date.now`). */
  now?: () => number;
  /** The clock and sleep of the bandwidth bucket (tests). */
  bandwidthClock?: { now: () => number; sleep: (ms: number) => Promise<void> };
}

const REFUSED =
  "error sending request: client error (Connect): tcp connect error: Connection refused (os error 111)";

/** A running (or in-process) fake hub. */
export class FakeHub {
  readonly #state: FakeHubState;
  readonly #hostname: string;
  #servers: Deno.HttpServer[] = [];
  #listens = false;
  #ports: [number, number];

  /** Use {@link startFakeHub} or {@link inProcessFakeHub}. */
  constructor(
    options: FakeHubOptions,
    origins: { hub: string; cdn: string },
    ports: [number, number],
  ) {
    const now = options.now ?? Date.now;
    this.#hostname = options.hostname ?? "127.0.0.1";
    this.#ports = ports;
    this.#state = {
      repos: new Map((options.repos ?? []).map((r) => [r.id, r])),
      tokens: new Set(options.tokens ?? []),
      counters: new FakeHubCounters(),
      bandwidth: new Bandwidth(
        options.bytesPerSecond,
        options.bandwidthClock?.now,
        options.bandwidthClock?.sleep,
      ),
      signer: new UrlSigner(options.signedUrlTtlSeconds ?? 600, now),
      online: true,
      hubOrigin: origins.hub,
      cdnOrigin: origins.cdn,
      sending: new Set(),
    };
  }

  /** The hub's endpoint, as `HF_ENDPOINT` would name it. */
  get endpoint(): string {
    return this.#state.hubOrigin;
  }

  /** The CDN's origin (where LFS files are redirected). */
  get cdnOrigin(): string {
    return this.#state.cdnOrigin;
  }

  /** What was asked so far. */
  get counters(): FakeHubCounters {
    return this.#state.counters;
  }

  /** The origin's bandwidth bucket (its cap, bytes granted, waits asked). */
  get bandwidth(): Bandwidth {
    return this.#state.bandwidth;
  }

  /** Whether it answers. */
  get isOnline(): boolean {
    return this.#state.online;
  }

  /** Serves one more repo (or replaces one of the same id). */
  addRepo(repo: FakeRepo): void {
    this.#state.repos.set(repo.id, repo);
  }

  /** Adds an account token. */
  addToken(token: string): void {
    this.#state.tokens.add(token);
  }

  /**
   * A fetch that reaches the hub and the CDN without sockets (any other
   * origin, or the hub switched off, is refused as a connection would be).
   */
  readonly fetch: typeof fetch = async (input, init) => {
    let request = new Request(input, init);
    // As fetch does: follow redirects unless told not to, dropping Authorization across origins.
    for (let hop = 0; hop <= 20; hop++) {
      const origin = new URL(request.url).origin;
      if (!this.#state.online || (origin !== this.endpoint && origin !== this.cdnOrigin)) {
        throw new TypeError("fetch failed", { cause: new Error(REFUSED) });
      }
      const handle = origin === this.endpoint ? handleHub : handleCdn;
      const response = handle(this.#state, request);
      const location = response.headers.get("Location");
      if (
        request.redirect !== "follow" || location === null || response.status < 300 ||
        response.status > 399
      ) {
        return response;
      }
      await response.body?.cancel();
      const next = new URL(location, request.url);
      const headers = new Headers(request.headers);
      if (next.origin !== origin) headers.delete("Authorization");
      request = new Request(next, {
        method: request.method,
        headers,
        redirect: "follow",
        signal: request.signal,
      });
    }
    throw new TypeError("fetch failed", { cause: new Error("too many redirects") });
  };

  /** Starts the listeners (again, on the same ports, after {@link offline}). */
  listen(): void {
    if (this.#servers.length > 0) return;
    this.#listens = true;
    const serve = (port: number, handle: typeof handleHub) =>
      Deno.serve(
        {
          hostname: this.#hostname,
          port,
          onListen: () => {},
          onError: () => new Response(null, { status: 500 }),
        },
        (request) => handle(this.#state, request),
      );
    this.#servers = [serve(this.#ports[0], handleHub), serve(this.#ports[1], handleCdn)];
    this.#ports = this.#servers.map((s) => (s.addr as Deno.NetAddr).port) as [number, number];
    const host = this.#hostname.includes(":") ? `[${this.#hostname}]` : this.#hostname;
    this.#state.hubOrigin = `http://${host}:${this.#ports[0]}`;
    this.#state.cdnOrigin = `http://${host}:${this.#ports[1]}`;
    this.#state.online = true;
  }

  /** The ports listened on (hub, CDN). */
  get ports(): [number, number] {
    return this.#ports;
  }

  /** Switches it off: bodies in flight break, the listeners close (connection refused). */
  async offline(): Promise<void> {
    this.#state.online = false;
    for (const sending of this.#state.sending) {
      try {
        sending.error(new Error("fake hub switched off"));
      } catch {
        // already closed
      }
    }
    this.#state.sending.clear();
    const servers = this.#servers;
    this.#servers = [];
    await Promise.all(servers.map((s) => s.shutdown()));
  }

  /** Switches it back on, on the same ports. */
  online(): void {
    if (this.#listens) this.listen();
    else this.#state.online = true; // in-process: nothing to listen on
  }

  /** Stops it for good. */
  async stop(): Promise<void> {
    await this.offline();
  }
}

/** A fake hub listening on two ports (hub and CDN) of `hostname`. */
export function startFakeHub(options: FakeHubOptions = {}): FakeHub {
  // The origins are set from the ports the listeners got.
  const hub = new FakeHub(options, { hub: "", cdn: "" }, [options.port ?? 0, options.cdnPort ?? 0]);
  hub.listen();
  return hub;
}

/** A fake hub reached only through its `fetch` (no sockets): `http://hub.fake`, `http://cdn.fake`. */
export function inProcessFakeHub(options: FakeHubOptions = {}): FakeHub {
  return new FakeHub(options, { hub: "http://hub.fake", cdn: "http://cdn.fake" }, [0, 0]);
}
