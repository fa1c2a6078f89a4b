/**
 * Who is asking the dashboard (docs/ui.md): the token from an
 * `Authorization: Bearer` header (scripts, tests) or from the HttpOnly
 * session cookie the sign-in form sets, what kind of token it is (the API's
 * own authorizer decides, so the dashboard accepts exactly what the admin API
 * accepts), and the CSRF checks a cookie-borne request must pass to act.
 *
 * @module
 */
import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import { ApiError } from "../control/api_error.ts";
import type { Authorizer } from "../control/api/route.ts";
import { bearer, digestMatches } from "../http/tokens.ts";

/** The session cookie: it holds the token itself, HttpOnly, SameSite=Strict, path /ui. */
export const SESSION_COOKIE = "llmgw_ui";

/** The header htmx sends the CSRF token in; forms send the field `_csrf`. */
export const CSRF_HEADER = "x-llmgw-csrf";

/** The longest token the sign-in form takes. */
export const MAX_TOKEN_CHARS = 4096;

/** A request's token and where it came from; null when it carries none. */
export interface Presented {
  /** The token. */
  token: string;
  /** `header`: Authorization: Bearer; `cookie`: the session cookie. */
  via: "header" | "cookie";
}

/** The token a request presents: the Authorization header wins over the cookie. */
export function presentedToken(c: Context): Presented | null {
  const header = c.req.header("authorization");
  if (header !== undefined) {
    const token = bearer(header);
    return token === null ? null : { token, via: "header" };
  }
  const cookie = getCookie(c, SESSION_COOKIE);
  return cookie === undefined || cookie === "" ? null : { token: cookie, via: "cookie" };
}

/** What a token may do on the dashboard. */
export type Standing =
  | { kind: "admin" }
  | { kind: "refused"; message: string }
  | { kind: "unknown"; message: string };

/**
 * A token's standing, asked of the API's authorizer for an admin route: an
 * admin token passes, a valid token of another kind is refused (403), and an
 * unknown, expired or revoked one is unknown (401).
 */
export async function standingOf(
  authorize: Authorizer,
  token: string,
): Promise<Standing> {
  // The authorizer reads only the Authorization header of the context it is given.
  const view = {
    req: {
      header: (name: string) =>
        name.toLowerCase() === "authorization" ? `Bearer ${token}` : undefined,
    },
  } as unknown as Context;
  try {
    await authorize("admin", view);
    return { kind: "admin" };
  } catch (e) {
    if (e instanceof ApiError && e.status === 403) {
      return { kind: "refused", message: e.message };
    }
    if (e instanceof ApiError && e.status === 401) {
      return { kind: "unknown", message: e.message };
    }
    throw e;
  }
}

const encoder = new TextEncoder();

function base64url(bytes: ArrayBuffer): string {
  return btoa(String.fromCharCode(...new Uint8Array(bytes)))
    .replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/**
 * CSRF tokens bound to a session's token: HMAC-SHA256 of the token under a
 * key made when the control plane starts, so nothing is stored, a page from
 * another session's token cannot act, and a restart asks pages to reload.
 */
export class CsrfTokens {
  readonly #key: Promise<CryptoKey>;

  /** Creates the signer with a fresh random key, or `secret` in tests. */
  constructor(secret: Uint8Array = crypto.getRandomValues(new Uint8Array(32))) {
    this.#key = crypto.subtle.importKey(
      "raw",
      secret as Uint8Array<ArrayBuffer>,
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
  }

  /** The CSRF token of a session token. */
  async of(token: string): Promise<string> {
    const mac = await crypto.subtle.sign(
      "HMAC",
      await this.#key,
      encoder.encode(`csrf:${token}`),
    );
    return base64url(mac);
  }

  /** Whether `presented` is the CSRF token of `token`, compared in constant time. */
  async matches(
    token: string,
    presented: string | undefined,
  ): Promise<boolean> {
    if (presented === undefined || presented === "") return false;
    const want = await this.of(token);
    // Equal-length strings compared without an early exit.
    return presented.length === want.length && digestMatches(presented, want);
  }
}

/**
 * Why a state-changing request is not from the dashboard's own page, or null
 * when it is: its Origin must be the dashboard's own; without an Origin
 * header (some browsers on same-origin POSTs), Sec-Fetch-Site must say
 * same-origin. No header at all is refused: a browser sends one of them.
 *
 * The dashboard's own origin is the request's, or the host a proxy in front
 * says the browser used (`X-Forwarded-Host`): an HA follower forwarding to
 * the leader (design §11.1) or an operator's reverse proxy. A cross-site page
 * cannot set that header (it would need a CORS preflight nobody answers).
 */
export function originProblem(
  requestUrl: string,
  origin: string | undefined,
  fetchSite: string | undefined,
  forwardedHost?: string,
): string | null {
  const url = new URL(requestUrl);
  const own = url.origin;
  if (origin !== undefined) {
    if (origin === own) return null;
    if (forwardedHost !== undefined && origin === `${url.protocol}//${forwardedHost}`) return null;
    return `Origin ${origin} is not this dashboard's (${own})`;
  }
  if (fetchSite !== undefined) {
    return fetchSite === "same-origin" ? null : `Sec-Fetch-Site is ${fetchSite}, not same-origin`;
  }
  return "the request has neither an Origin nor a Sec-Fetch-Site header";
}

/** Whether the dashboard is served over HTTPS here: the cookie is then Secure. */
export function servedOverHttps(requestUrl: string): boolean {
  return new URL(requestUrl).protocol === "https:";
}

/** A `next` target after sign-in: only a path under /ui/, never another site. */
export function safeNext(next: string | undefined): string {
  if (
    next === undefined || !/^\/ui\/[^\\]*$/.test(next) || next.startsWith("//")
  ) return "/ui/";
  return next;
}
