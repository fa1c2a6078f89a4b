/**
 * Following the control plane (design §11, §12): the gateway polls
 * `GET {control}/v1/endpoints` with a gateway token (ready rank-0 endpoints,
 * the API keys, and every served name, so that a deployment with no ready
 * replica answers 503 rather than 404) and replaces its table.
 *
 * A failed poll keeps the last known set: the control plane being
 * unreachable must not take traffic away from replicas that still serve.
 *
 * @module
 */
import { parseEndpointListAnswer } from "../protocol/gateway_protocol.ts";
import { readErrorBody } from "../protocol/error_body.ts";
import { WireFormatError } from "../protocol/wire_error.ts";
import type { ApiKeySpec, ApiKeyTable } from "./api_keys.ts";
import type { EndpointSpec, EndpointTable } from "./endpoints.ts";
import type { RoutingPolicy } from "../deployment/schema.ts";
import { errorMessage } from "../text/error_message.ts";
import { type Clock, systemClock } from "../time/clock.ts";

/** What one poll of the control plane returned. */
export interface ControlSnapshot {
  /** Ready endpoints. */
  endpoints: EndpointSpec[];
  /** Served model names of all deployments. */
  models: string[];
  /** API keys (hashes and allowed models). */
  apiKeys: ApiKeySpec[];
  /** Each served model's routing policy (absent: the default). */
  routing: Record<string, RoutingPolicy>;
}

/**
 * Fetches one snapshot from the control plane at `url` with `token`; throws
 * on any failure (network, status, an answer that is not JSON or does not
 * match protocol/gateway_protocol.ts, with the field path).
 */
export async function fetchSnapshot(
  url: string,
  token: string,
  options: { fetch?: typeof fetch; timeoutMs?: number } = {},
): Promise<ControlSnapshot> {
  const f = options.fetch ?? fetch;
  const get = async <T>(path: string, parse: (body: unknown) => T): Promise<T> => {
    const res = await f(`${url.replace(/\/+$/, "")}${path}`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(options.timeoutMs ?? 5_000),
    });
    if (!res.ok) {
      // The control plane's error body says why (a revoked token, a follower that lost the leader).
      const why = readErrorBody(await res.text().catch(() => ""));
      throw new Error(
        `GET ${path}: HTTP ${res.status}${why === null ? "" : `: ${why.code}: ${why.message}`}`,
      );
    }
    let body: unknown;
    try {
      body = await res.json();
    } catch (e) {
      // A timeout while reading the body is a timeout, not bad JSON.
      if (e instanceof SyntaxError) throw new Error(`GET ${path}: the answer is not JSON`);
      throw e;
    }
    try {
      return parse(body);
    } catch (e) {
      if (e instanceof WireFormatError) throw new Error(`GET ${path}: ${e.message}`);
      throw e;
    }
  };
  const list = await get("/v1/endpoints", parseEndpointListAnswer);
  return {
    endpoints: list.endpoints,
    models: list.models,
    apiKeys: list.api_keys,
    routing: list.routing,
  };
}

/** Settings of {@link followControlPlane}. */
export interface FollowOptions {
  /** Poll period in ms (default 2 000). */
  intervalMs?: number;
  /** Timeout of one poll in ms (default 5 000). */
  timeoutMs?: number;
  /** The fetch to use (tests may inject one). */
  fetch?: typeof fetch;
  /** Called with a one-line note when polling starts failing or recovers. */
  log?: (line: string) => void;
  /** Keeps this table of API keys in step with the control plane's. */
  keys?: ApiKeyTable;
  /** Dates each sync ({@link ControlFollower.lastSyncAt}). Default: the system clock. */
  clock?: Clock;
}

/** A running follower. */
export interface ControlFollower {
  /** Resolves after the first successful poll (never rejects). */
  readonly synced: Promise<void>;
  /** The last poll's error, or null after a success. */
  readonly lastError: string | null;
  /** When the table was last updated (ms since epoch), or null. */
  readonly lastSyncAt: number | null;
  /** Stops polling and waits for a poll in flight to end. */
  stop(): Promise<void>;
}

/**
 * Polls the control plane at `url` every `intervalMs`, replacing `table`'s
 * endpoints on each success and keeping them on failure (design §12).
 */
export function followControlPlane(
  url: string,
  token: string,
  table: EndpointTable,
  options: FollowOptions = {},
): ControlFollower {
  const intervalMs = options.intervalMs ?? 2_000;
  const log = options.log ?? (() => {});
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let wake: (() => void) | undefined;
  let lastError: string | null = null;
  let lastSyncAt: number | null = null;
  let resolveSynced!: () => void;
  const synced = new Promise<void>((r) => resolveSynced = r);

  const loop = async () => {
    while (!stopped) {
      try {
        const snap = await fetchSnapshot(url, token, options);
        if (stopped) break;
        table.setEndpoints(snap.endpoints, snap.models, snap.routing);
        options.keys?.set(snap.apiKeys);
        if (lastError !== null) log(`gateway: control plane reachable again at ${url}`);
        lastError = null;
        lastSyncAt = (options.clock ?? systemClock).now();
        resolveSynced();
      } catch (e) {
        const message = errorMessage(e);
        if (lastError === null) {
          log(
            `gateway: cannot poll the control plane at ${url} (${message}); keeping the last known endpoints`,
          );
        }
        lastError = message;
      }
      if (stopped) break;
      await new Promise<void>((r) => {
        wake = r;
        timer = setTimeout(r, intervalMs);
      });
    }
  };
  const running = loop();
  return {
    synced,
    get lastError() {
      return lastError;
    },
    get lastSyncAt() {
      return lastSyncAt;
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      wake?.();
      await running;
    },
  };
}
