/**
 * The fleet dashboard (docs/ui.md): server-rendered pages with Hono's JSX
 * and htmx, mounted by the control plane's API at /ui.
 *
 * @module
 */
export { UI_ROUTES, type UiAccess, uiApp, type UiOptions, type UiRoute } from "./ui_app.tsx";
export { CSRF_HEADER, CsrfTokens, SESSION_COOKIE } from "./session.ts";
