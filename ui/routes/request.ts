/**
 * What the dashboard's routes read from a request: path parameters, form
 * fields, the CSRF token presented and the origin check's verdict.
 *
 * @module
 */
import type { Context } from "hono";
import { NotFoundError } from "../../control/errors.ts";
import { CSRF_HEADER, originProblem } from "../session.ts";

/** A path parameter the route declares; a NotFoundError when it is missing or empty. */
export function param(c: Context, name: string): string {
  const v = c.req.param(name);
  if (v === undefined || v === "") {
    throw new NotFoundError(`no ${name} in ${c.req.path}`);
  }
  return v;
}

/** A urlencoded or multipart body's string fields, read once per request. */
export async function formOf(c: Context): Promise<Record<string, string | undefined>> {
  const type = c.req.header("content-type") ?? "";
  if (!/application\/x-www-form-urlencoded|multipart\/form-data/.test(type)) {
    return {};
  }
  const body = await c.req.parseBody();
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(body)) {
    if (typeof v === "string") out[k] = v;
  }
  return out;
}

/** The CSRF token a request presents: its header, else its form's `_csrf` field. */
export async function presentedCsrf(c: Context): Promise<string | undefined> {
  const form = await formOf(c);
  return c.req.header(CSRF_HEADER) ?? form._csrf;
}

/** Why a request does not come from the dashboard's own origin, or null when it does. */
export function requestOriginProblem(c: Context): string | null {
  return originProblem(
    c.req.url,
    c.req.header("origin"),
    c.req.header("sec-fetch-site"),
    c.req.header("x-forwarded-host"),
  );
}
