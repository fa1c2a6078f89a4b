/**
 * The guard on every dashboard route but the open ones (docs/ui.md): it
 * finds the caller's token (session cookie or Bearer header), answers 401
 * or 403 as the route's access says (see route_table.ts), checks an action's
 * origin and CSRF token when it comes with the cookie, and answers a domain
 * error a handler throws with a page or text naming it.
 *
 * @module
 */
import type { Context } from "hono";
import type { Authorizer } from "../../control/api/route.ts";
import { errorMessage } from "../../control/errors.ts";
import { Layout, type SessionView } from "../layout.tsx";
import {
  type CsrfTokens,
  MAX_TOKEN_CHARS,
  presentedToken,
  safeNext,
  standingOf,
} from "../session.ts";
import { RefusedPage, SignInPage } from "../sign_in_page.tsx";
import { errorStatus } from "./error_status.ts";
import { html, text } from "./page_response.ts";
import { presentedCsrf, requestOriginProblem } from "./request.ts";
import { clearSession } from "./session_cookie.ts";
import type { UiAccess } from "./route_table.ts";

/** The access of a route the guard stands in front of. */
export type GuardedAccess = Exclude<UiAccess, "open">;

/** A guarded route's handler: the request and the caller's session. */
export type GuardedHandler = (c: Context, s: SessionView) => Promise<Response> | Response;

/** Wraps a handler in the guard for routes of `access`. */
export type Guard = (
  access: GuardedAccess,
  handler: GuardedHandler,
) => (c: Context) => Promise<Response>;

/** An answer a check ends a request with. */
class Stop extends Error {
  constructor(readonly response: Response) {
    super("stop");
  }
}

/** The guard over tokens `authorize` knows, with the CSRF signer `csrf`. */
export function uiGuard(authorize: Authorizer, csrf: CsrfTokens): Guard {
  /** The session of a page, fragment or action request, or a Stop with the answer. */
  async function session(c: Context, access: GuardedAccess): Promise<SessionView> {
    const presented = presentedToken(c);
    const signIn = async (notice?: string): Promise<never> => {
      if (presented?.via === "cookie") clearSession(c);
      if (access === "page") {
        throw new Stop(
          await html(
            c,
            <SignInPage next={safeNext(here(c))} notice={notice} />,
            401,
          ),
        );
      }
      // htmx reloads the page, which then shows the sign-in form.
      throw new Stop(
        text(
          c,
          notice ??
            "an admin token is required (sign in, or Authorization: Bearer …)",
          401,
          {
            "hx-refresh": "true",
            "www-authenticate": 'Bearer realm="llmgw"',
          },
        ),
      );
    };
    if (presented === null) return await signIn();
    if (presented.token.length > MAX_TOKEN_CHARS) {
      return await signIn("That token is too long.");
    }
    const standing = await standingOf(authorize, presented.token);
    if (standing.kind === "unknown") {
      return await signIn(
        presented.via === "cookie"
          ? "Your session's token is unknown, expired or revoked: sign in again."
          : standing.message,
      );
    }
    const token = presented.via === "cookie" ? await csrf.of(presented.token) : null;
    if (standing.kind === "refused") {
      throw new Stop(
        access === "page"
          ? await html(
            c,
            <RefusedPage message={standing.message} csrf={token} />,
            403,
          )
          : text(c, standing.message, 403),
      );
    }
    if (access === "action" && presented.via === "cookie") {
      // A Bearer header is never sent by a browser on its own; a cookie is.
      const problem = requestOriginProblem(c);
      if (problem !== null) {
        throw new Stop(text(c, `Cannot act: ${problem}`, 403));
      }
      if (!await csrf.matches(presented.token, await presentedCsrf(c))) {
        throw new Stop(
          text(
            c,
            "Cannot act: the CSRF token is missing or not this session's; reload the page",
            403,
          ),
        );
      }
    }
    return { csrf: token };
  }

  // A Stop is the handler's answer, a domain error a page or text naming it.
  return (access, handler) => async (c) => {
    try {
      return await handler(c, await session(c, access));
    } catch (e) {
      if (e instanceof Stop) return e.response;
      const status = errorStatus(e);
      if (status === null) throw e;
      if (access !== "page") return text(c, errorMessage(e), status);
      return await html(
        c,
        <Layout title="Error" page="fleet" session={{ csrf: null }}>
          <div class="notice">{errorMessage(e)}</div>
          <a href="/ui/">Back to the fleet</a>
        </Layout>,
        status,
      );
    }
  };
}

/** The path and query asked for, to come back to after signing in. */
function here(c: Context): string {
  const u = new URL(c.req.url);
  return `${u.pathname}${u.search}`;
}
