/**
 * Signing in and out of the dashboard (docs/ui.md): `/ui` to `/ui/`, the
 * sign-in form and its POST, which checks the token and sets the session
 * cookie, and sign-out, which clears it. All `open`; both POSTs must come
 * from the dashboard's own origin, and sign-out with a cookie must carry
 * its CSRF token.
 *
 * @module
 */
import { Hono } from "hono";
import type { Authorizer } from "../../control/api/route.ts";
import {
  type CsrfTokens,
  MAX_TOKEN_CHARS,
  presentedToken,
  safeNext,
  standingOf,
} from "../session.ts";
import { RefusedPage, SignInPage } from "../sign_in_page.tsx";
import { html, text } from "./page_response.ts";
import { formOf, presentedCsrf, requestOriginProblem } from "./request.ts";
import { clearSession, setSession } from "./session_cookie.ts";

/** The session routes, over tokens `authorize` knows and the CSRF signer `csrf`. */
export function sessionRoutes(authorize: Authorizer, csrf: CsrfTokens): Hono {
  const app = new Hono();
  app.get("/ui", (c) => c.redirect("/ui/", 308));
  app.get(
    "/ui/sign-in",
    async (c) => await html(c, <SignInPage next={safeNext(c.req.query("next"))} />, 200),
  );
  app.post("/ui/sign-in", async (c) => {
    const problem = requestOriginProblem(c);
    if (problem !== null) return text(c, `Cannot sign in: ${problem}`, 403);
    const form = await formOf(c);
    const next = safeNext(form.next);
    const token = (form.token ?? "").trim();
    if (token === "") {
      return await html(
        c,
        <SignInPage next={next} notice="Cannot sign in: the token is empty." />,
        400,
      );
    }
    if (token.length > MAX_TOKEN_CHARS || /\s/.test(token)) {
      return await html(
        c,
        <SignInPage
          next={next}
          notice="Cannot sign in: that is not a token (too long, or with spaces)."
        />,
        400,
      );
    }
    const standing = await standingOf(authorize, token);
    if (standing.kind === "unknown") {
      return await html(
        c,
        <SignInPage
          next={next}
          notice="Cannot sign in: this token is unknown, expired or revoked."
        />,
        401,
      );
    }
    if (standing.kind === "refused") {
      return await html(c, <RefusedPage message={standing.message} csrf={null} />, 403);
    }
    setSession(c, token);
    return c.redirect(next, 303);
  });
  app.post("/ui/sign-out", async (c) => {
    const problem = requestOriginProblem(c);
    if (problem !== null) return text(c, `Cannot sign out: ${problem}`, 403);
    const presented = presentedToken(c);
    if (
      presented?.via === "cookie" &&
      !await csrf.matches(presented.token, await presentedCsrf(c))
    ) {
      return text(c, "Cannot sign out: the CSRF token is missing or not this session's", 403);
    }
    clearSession(c);
    return c.redirect("/ui/sign-in", 303);
  });
  return app;
}
