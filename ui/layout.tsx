/**
 * The page shell every dashboard page shares: the top bar with the three
 * pages and sign-out, the assets, and the CSRF token htmx sends with every
 * request it makes (`hx-headers` on the body).
 *
 * @module
 */
import type { Child } from "hono/jsx";
import { assetPath, ASSETS } from "./assets.ts";
import { CSRF_HEADER } from "./session.ts";

/** Which page is shown, for the top bar. */
export type PageName = "fleet" | "deployments" | "replica" | "models" | "sign-in";

/** What a signed-in page knows of its session. */
export interface SessionView {
  /** The CSRF token of the session; null for a Bearer-header request (no cookie, nothing to forge). */
  csrf: string | null;
}

/** htmx settings: no eval (no inline handlers are used) and no injected style element (the CSP forbids it). */
const HTMX_CONFIG = JSON.stringify({
  includeIndicatorStyles: false,
  allowEval: false,
  allowScriptTags: false,
  historyCacheSize: 0,
});

/** The document around a page's content. */
export function Layout(props: {
  title: string;
  page: PageName;
  session: SessionView | null;
  children?: Child;
}) {
  const headers = props.session?.csrf == null
    ? undefined
    : JSON.stringify({ [CSRF_HEADER]: props.session.csrf });
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="htmx-config" content={HTMX_CONFIG} />
        <title>{props.title} · llmgw</title>
        <link rel="stylesheet" href={assetPath(ASSETS.css)} />
        <script src={assetPath(ASSETS.htmx)} defer></script>
        <script src={assetPath(ASSETS.js)} defer></script>
      </head>
      <body hx-headers={headers}>
        <header class="top">
          <span class="brand">llmgw</span>
          {props.session === null ? null : (
            <nav>
              <a href="/ui/" class={props.page === "fleet" ? "on" : undefined}>
                Fleet
              </a>
              <a
                href="/ui/deployments"
                class={props.page === "deployments" || props.page === "replica" ? "on" : undefined}
              >
                Deployments
              </a>
              <a href="/ui/models" class={props.page === "models" ? "on" : undefined}>
                Models
              </a>
            </nav>
          )}
          {props.session === null ? null : (
            <div class="who">
              <span>admin</span>
              {props.session.csrf === null
                ? null
                : (
                  <form method="post" action="/ui/sign-out" class="inline">
                    <input
                      type="hidden"
                      name="_csrf"
                      value={props.session.csrf}
                    />
                    <button type="submit">Sign out</button>
                  </form>
                )}
            </div>
          )}
        </header>
        <main>{props.children}</main>
      </body>
    </html>
  );
}

/** A state as a coloured badge. */
export function StateBadge(props: { state: string }) {
  return <span class={`badge s-${props.state}`}>{props.state}</span>;
}

/** Mebibytes as GiB with one decimal. */
export function gib(mb: number | null): string {
  return mb === null ? "?" : (mb / 1024).toFixed(mb >= 10 * 1024 ? 0 : 1);
}

/** Milliseconds ago in words, e.g. `3 s ago`. */
export function ago(ms: number, now: number): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}
