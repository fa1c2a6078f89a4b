/**
 * Who may use each dashboard route (docs/ui.md). {@link UI_ROUTES} declares
 * every route, so the auth matrix (tests/security_test.ts) covers each one:
 *
 * - `open`: the sign-in form, its POST, sign-out and the assets;
 * - `page`: a full page; without a valid token the sign-in page (401), with
 *   a valid token of another kind the refused page (403);
 * - `fragment`: what htmx and EventSource fetch; 401 / 403 as plain text;
 * - `action`: a POST that changes something; 401 / 403, and a request
 *   carrying the session cookie must also come from the dashboard's own
 *   origin and carry the session's CSRF token, or it is 403.
 *
 * @module
 */

/** Who may use a dashboard route; see the module documentation. */
export type UiAccess = "open" | "page" | "fragment" | "action";

/** A dashboard route's declaration. */
export interface UiRoute {
  /** HTTP method. */
  method: "GET" | "POST";
  /** Hono path under the app's root, `:name` for parameters. */
  path: string;
  /** Who may use it. */
  access: UiAccess;
}

/** Every dashboard route, with its path as mounted (under /ui). */
export const UI_ROUTES: readonly UiRoute[] = [
  { method: "GET", path: "/ui", access: "open" },
  { method: "GET", path: "/ui/sign-in", access: "open" },
  { method: "POST", path: "/ui/sign-in", access: "open" },
  { method: "POST", path: "/ui/sign-out", access: "open" },
  { method: "GET", path: "/ui/assets/:name", access: "open" },
  { method: "GET", path: "/ui/", access: "page" },
  { method: "GET", path: "/ui/deployments", access: "page" },
  { method: "GET", path: "/ui/replicas/:id", access: "page" },
  { method: "GET", path: "/ui/models", access: "page" },
  { method: "GET", path: "/ui/fragments/fleet", access: "fragment" },
  { method: "GET", path: "/ui/fragments/deployments", access: "fragment" },
  { method: "GET", path: "/ui/fragments/models", access: "fragment" },
  { method: "GET", path: "/ui/fragments/replicas/:id", access: "fragment" },
  { method: "GET", path: "/ui/replicas/:id/logs", access: "fragment" },
  { method: "POST", path: "/ui/nodes/:id/cordon", access: "action" },
  { method: "POST", path: "/ui/nodes/:id/uncordon", access: "action" },
  { method: "POST", path: "/ui/nodes/:id/drain", access: "action" },
  { method: "POST", path: "/ui/deployments/:name/scale", access: "action" },
  { method: "GET", path: "/ui/*", access: "page" },
];
