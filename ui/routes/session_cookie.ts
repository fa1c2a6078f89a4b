/**
 * The session cookie: set on sign-in, cleared on sign-out and when the token
 * it holds is no longer good. HttpOnly, SameSite=Strict, scoped to /ui, and
 * Secure when the dashboard is served over HTTPS.
 *
 * @module
 */
import type { Context } from "hono";
import { deleteCookie, setCookie } from "hono/cookie";
import { servedOverHttps, SESSION_COOKIE } from "../session.ts";

/** How long the session cookie lives: a working day. */
const SESSION_SECONDS = 12 * 3600;

/** Sets the session cookie to `token`. */
export function setSession(c: Context, token: string): void {
  setCookie(c, SESSION_COOKIE, token, {
    path: "/ui",
    httpOnly: true,
    sameSite: "Strict",
    secure: servedOverHttps(c.req.url),
    maxAge: SESSION_SECONDS,
  });
}

/** Clears the session cookie. */
export function clearSession(c: Context): void {
  deleteCookie(c, SESSION_COOKIE, {
    path: "/ui",
    secure: servedOverHttps(c.req.url),
    httpOnly: true,
  });
}
