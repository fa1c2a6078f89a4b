/**
 * The one place llmgw sends a request to a hub or to the host a hub
 * redirects to. It owns the token rule: `Authorization` goes only to the
 * endpoint's own origin, never to a CDN or any other host (huggingface_hub
 * drops it likewise when a download leaves the endpoint's host). Redirects
 * are never followed here (`redirect: "manual"`): the caller decides where to
 * go next, so no redirect can carry the token elsewhere. A request that gets
 * no answer becomes a {@link HubUnreachableError} naming only the origin.
 *
 * @module
 */
import type { HubConfig } from "./hub_config.ts";
import { HubUnreachableError, unreachableReason } from "./hub_errors.ts";

/** How a hub client reaches the network (fetch injected in tests). */
export interface HubTransport {
  /** The endpoint and token. */
  config: HubConfig;
  /** The fetch to use. */
  fetch: typeof fetch;
  /** The `User-Agent` sent with every request. */
  userAgent: string;
}

/** What one request carries. */
export interface HubRequestInit {
  /** `GET` or `HEAD`. */
  method: "GET" | "HEAD";
  /** Extra headers (`Range`). */
  headers?: Record<string, string>;
  /** Cancels the request. */
  signal?: AbortSignal;
}

/** Whether `url` is on the endpoint's own origin (the only one that sees the token). */
export function isEndpointOrigin(config: HubConfig, url: string): boolean {
  return new URL(url).origin === new URL(config.endpoint).origin;
}

/** Sends one request; never follows a redirect; the token only to the endpoint's origin. */
export async function hubRequest(
  transport: HubTransport,
  url: string,
  init: HubRequestInit,
): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("User-Agent", transport.userAgent);
  // The hub gzips some text files; sizes and ranges are of the identity encoding.
  headers.set("Accept-Encoding", "identity");
  const { token } = transport.config;
  if (token !== undefined && isEndpointOrigin(transport.config, url)) {
    headers.set("Authorization", token.authorization());
  }
  try {
    return await transport.fetch(url, {
      method: init.method,
      headers,
      redirect: "manual",
      signal: init.signal,
    });
  } catch (e) {
    if (init.signal?.aborted) throw init.signal.reason;
    throw new HubUnreachableError(new URL(url).origin, unreachableReason(e));
  }
}

/** Frees a response's connection when its body is not wanted. */
export async function discardBody(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => {});
}
