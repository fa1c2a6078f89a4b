/**
 * The fleet dashboard (docs/ui.md): server-rendered pages with Hono's JSX
 * and htmx, mounted by the control plane's API at /ui.
 *
 * @module
 */
export { uiApp, type UiOptions } from "./ui_app.tsx";
export { UI_ROUTES, type UiAccess, type UiRoute } from "./routes/route_table.ts";
export { CSRF_HEADER, CsrfTokens, SESSION_COOKIE } from "./session.ts";
