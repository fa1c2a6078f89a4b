/**
 * The dashboard's routes (docs/ui.md), one Hono app mounted by the control
 * plane's API, every path under /ui. {@link UI_ROUTES} declares every route with who may
 * use it, so the auth matrix (tests/security_test.ts) covers each one:
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
import { type Context, Hono } from "hono";
import { deleteCookie, setCookie } from "hono/cookie";
import type { Child } from "hono/jsx";
import { streamSSE } from "hono/streaming";
import type { Authorizer } from "../control/api/route.ts";
import type { ControlPlane } from "../control/control_plane.ts";
import {
  AgentUnavailableError,
  ConflictError,
  ControlError,
  errorMessage,
  ForbiddenError,
  InvalidInputError,
  NotFoundError,
  NotSettledError,
} from "../control/errors.ts";
import type { NodeIntent } from "../control/store.ts";
import { StoreError } from "../control/store.ts";
import { assetNamed, assetResponse } from "./assets.ts";
import { DeploymentsFragment, DeploymentsPage } from "./deployments_page.tsx";
import { FleetFragment, FleetPage } from "./fleet_page.tsx";
import { fleetModel, FleetQueryError, parseFleetQuery } from "./fleet_model.ts";
import { Layout, type SessionView } from "./layout.tsx";
import { LogFollowers, type LogNews } from "./log_follower.ts";
import { lineId, resumeAfter } from "./log_resume.ts";
import { REPLICA_EVENTS, ReplicaFragment, ReplicaPage } from "./replica_page.tsx";
import {
  CSRF_HEADER,
  CsrfTokens,
  MAX_TOKEN_CHARS,
  originProblem,
  presentedToken,
  safeNext,
  servedOverHttps,
  SESSION_COOKIE,
  standingOf,
} from "./session.ts";
import { RefusedPage, SignInPage } from "./sign_in_page.tsx";

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
  { method: "GET", path: "/ui/fragments/fleet", access: "fragment" },
  { method: "GET", path: "/ui/fragments/deployments", access: "fragment" },
  { method: "GET", path: "/ui/fragments/replicas/:id", access: "fragment" },
  { method: "GET", path: "/ui/replicas/:id/logs", access: "fragment" },
  { method: "POST", path: "/ui/nodes/:id/cordon", access: "action" },
  { method: "POST", path: "/ui/nodes/:id/uncordon", access: "action" },
  { method: "POST", path: "/ui/nodes/:id/drain", access: "action" },
  { method: "POST", path: "/ui/deployments/:name/scale", access: "action" },
  { method: "GET", path: "/ui/*", access: "page" },
];

/** How long the session cookie lives: a working day. */
const SESSION_SECONDS = 12 * 3600;

/** How often an idle SSE stream sends a comment, so proxies keep it open. */
const SSE_KEEPALIVE_MS = 15_000;

/** Headers on every page and fragment: no framing, no caching, only the dashboard's own scripts. */
const PAGE_HEADERS: Record<string, string> = {
  "content-security-policy":
    // Inline style attributes carry the bars' widths; scripts stay the dashboard's own files.
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
    "object-src 'none'; base-uri 'none'; " +
    "form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  // Not no-referrer: under it Chromium sends "Origin: null" on form posts, which the origin check refuses.
  "referrer-policy": "same-origin",
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
};

/** An answer a check ends a request with. */
class Stop extends Error {
  constructor(readonly response: Response) {
    super("stop");
  }
}

/** Settings of {@link uiApp}. */
export interface UiOptions {
  /** The CSRF signer; default: one with a fresh random key. */
  csrf?: CsrfTokens;
}

/** The dashboard as a Hono app; its paths are under /ui (mount it at the root). */
export function uiApp(
  cp: ControlPlane,
  authorize: Authorizer,
  options: UiOptions = {},
): Hono {
  const csrf = options.csrf ?? new CsrfTokens();
  const followers = new LogFollowers((replica, rank, lines) =>
    cp.agentLogs.shard(replica, rank, lines)
  );
  const app = new Hono();

  const html = (c: Context, body: Child, status: number) =>
    c.html(`<!doctype html>${body}`, status as 200, PAGE_HEADERS);
  const text = (
    c: Context,
    body: string,
    status: number,
    extra: Record<string, string> = {},
  ) => c.text(body, status as 200, { ...PAGE_HEADERS, ...extra });
  const secure = (c: Context) => servedOverHttps(c.req.url);
  const clearSession = (c: Context) =>
    deleteCookie(c, SESSION_COOKIE, {
      path: "/ui",
      secure: secure(c),
      httpOnly: true,
    });
  const here = (c: Context) => {
    const u = new URL(c.req.url);
    return `${u.pathname}${u.search}`;
  };

  /** The session of a page, fragment or action request, or a Stop with the answer. */
  async function session(
    c: Context,
    access: Exclude<UiAccess, "open">,
  ): Promise<SessionView> {
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
      const problem = originProblem(
        c.req.url,
        c.req.header("origin"),
        c.req.header("sec-fetch-site"),
        c.req.header("x-forwarded-host"),
      );
      if (problem !== null) {
        throw new Stop(text(c, `Cannot act: ${problem}`, 403));
      }
      const form = await formOf(c);
      const presentedCsrf = c.req.header(CSRF_HEADER) ?? form._csrf;
      if (!await csrf.matches(presented.token, presentedCsrf)) {
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

  /** Runs a handler; a Stop is its answer, a domain error a page or text naming it. */
  function guarded(
    access: Exclude<UiAccess, "open">,
    handler: (c: Context, s: SessionView) => Promise<Response> | Response,
  ) {
    return async (c: Context) => {
      try {
        return await handler(c, await session(c, access));
      } catch (e) {
        if (e instanceof Stop) return e.response;
        const status = e instanceof FleetQueryError
          ? 400
          : e instanceof ControlError
          ? statusOf(e)
          : e instanceof StoreError
          ? 503
          : null;
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

  app.get("/ui", (c) => c.redirect("/ui/", 308));
  app.get(
    "/ui/sign-in",
    async (c) => await html(c, <SignInPage next={safeNext(c.req.query("next"))} />, 200),
  );
  app.post(
    "/ui/sign-in",
    async (c) => {
      const problem = originProblem(
        c.req.url,
        c.req.header("origin"),
        c.req.header("sec-fetch-site"),
        c.req.header("x-forwarded-host"),
      );
      if (problem !== null) return text(c, `Cannot sign in: ${problem}`, 403);
      const form = await formOf(c);
      const next = safeNext(form.next);
      const token = (form.token ?? "").trim();
      if (token === "") {
        return await html(
          c,
          <SignInPage
            next={next}
            notice="Cannot sign in: the token is empty."
          />,
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
        return await html(
          c,
          <RefusedPage message={standing.message} csrf={null} />,
          403,
        );
      }
      setCookie(c, SESSION_COOKIE, token, {
        path: "/ui",
        httpOnly: true,
        sameSite: "Strict",
        secure: secure(c),
        maxAge: SESSION_SECONDS,
      });
      return c.redirect(next, 303);
    },
  );
  app.post(
    "/ui/sign-out",
    async (c) => {
      const problem = originProblem(
        c.req.url,
        c.req.header("origin"),
        c.req.header("sec-fetch-site"),
        c.req.header("x-forwarded-host"),
      );
      if (problem !== null) return text(c, `Cannot sign out: ${problem}`, 403);
      const presented = presentedToken(c);
      if (presented?.via === "cookie") {
        const form = await formOf(c);
        if (
          !await csrf.matches(
            presented.token,
            c.req.header(CSRF_HEADER) ?? form._csrf,
          )
        ) {
          return text(
            c,
            "Cannot sign out: the CSRF token is missing or not this session's",
            403,
          );
        }
      }
      clearSession(c);
      return c.redirect("/ui/sign-in", 303);
    },
  );
  app.get(
    "/ui/assets/:name",
    (c) => {
      const a = assetNamed(c.req.param("name"));
      if (a === undefined) {
        return text(c, `no asset ${c.req.param("name")}`, 404);
      }
      return assetResponse(a, c.req.header("accept-encoding"));
    },
  );

  app.get(
    "/ui/",
    guarded("page", async (c, s) => {
      const query = parseFleetQuery(c.req.query());
      return await html(
        c,
        <FleetPage
          model={fleetModel(cp.nodes.list(), query)}
          query={query}
          now={cp.state.now()}
          session={s}
        />,
        200,
      );
    }),
  );
  app.get(
    "/ui/fragments/fleet",
    guarded("fragment", async (c) => {
      const query = parseFleetQuery(c.req.query());
      return await html(
        c,
        <FleetFragment
          model={fleetModel(cp.nodes.list(), query)}
          query={query}
          now={cp.state.now()}
        />,
        200,
      );
    }),
  );
  app.get(
    "/ui/deployments",
    guarded("page", async (c, s) =>
      await html(
        c,
        <DeploymentsPage
          deployments={cp.deployments.list()}
          replicas={cp.replicas()}
          session={s}
        />,
        200,
      )),
  );
  app.get(
    "/ui/fragments/deployments",
    guarded(
      "fragment",
      async (c) =>
        await html(
          c,
          <DeploymentsFragment
            deployments={cp.deployments.list()}
            replicas={cp.replicas()}
          />,
          200,
        ),
    ),
  );
  const replicaOf = (id: string) => {
    const r = cp.replicas().find((v) => v.id === id);
    if (r === undefined) throw new NotFoundError(`no replica ${id}`);
    return r;
  };
  const nodesById = () => new Map(cp.nodes.list().map((n) => [n.id, n]));
  const eventsOf = (id: string) =>
    cp.events.list({ subject: `replica/${id}`, limit: REPLICA_EVENTS });
  app.get(
    "/ui/replicas/:id",
    guarded("page", async (c, s) => {
      const r = replicaOf(param(c, "id"));
      const rank = rankOf(c.req.query("rank"), r.shards.map((sh) => sh.rank));
      return await html(
        c,
        <ReplicaPage
          replica={r}
          nodes={nodesById()}
          events={await eventsOf(r.id)}
          rank={rank}
          session={s}
        />,
        200,
      );
    }),
  );
  app.get(
    "/ui/fragments/replicas/:id",
    guarded("fragment", async (c) => {
      const r = replicaOf(param(c, "id"));
      return await html(
        c,
        <ReplicaFragment
          replica={r}
          nodes={nodesById()}
          events={await eventsOf(r.id)}
        />,
        200,
      );
    }),
  );
  app.get(
    "/ui/replicas/:id/logs",
    guarded("fragment", (c) => {
      const r = replicaOf(param(c, "id"));
      const rank = rankOf(c.req.query("rank"), r.shards.map((sh) => sh.rank));
      const lastEventId = c.req.header("last-event-id") ?? null;
      c.header("x-content-type-options", "nosniff");
      return streamSSE(c, async (stream) => {
        const queue: LogNews[] = [];
        let wake: (() => void) | null = null;
        const watch = followers.watch(r.id, rank, (n) => {
          queue.push(n);
          wake?.();
        });
        stream.onAbort(() => {
          watch.close();
          wake?.();
        });
        try {
          await watch.ready;
          const window = watch.window();
          const resume = resumeAfter(window, lastEventId);
          await stream.writeSSE({
            event: "status",
            data: watch.status() ?? "",
            retry: 1000,
          });
          if (resume.gap) {
            await stream.writeSSE({
              event: "gap",
              data: "earlier lines are no longer kept",
            });
          }
          let last = 0;
          for (const l of resume.lines) {
            await stream.writeSSE({
              data: l.text,
              id: lineId(window.epoch, l.seq),
            });
            last = l.seq;
          }
          // Lines a reader already has come again through the queue only if newer.
          if (resume.lines.length === 0) last = window.next - 1;
          while (!stream.aborted) {
            const news = queue.shift();
            if (news === undefined) {
              let timer: ReturnType<typeof setTimeout> | undefined;
              const idle = await new Promise<boolean>((resolve) => {
                wake = () => resolve(false);
                timer = setTimeout(() => resolve(true), SSE_KEEPALIVE_MS);
              });
              clearTimeout(timer);
              wake = null;
              if (idle && !stream.aborted) {
                await stream.write(": keep-alive\n\n");
              }
              continue;
            }
            if (news.kind === "status") {
              await stream.writeSSE({ event: "status", data: news.message });
              continue;
            }
            const fresh = news.lines.filter((l) => l.seq > last);
            if (fresh.length === 0) continue;
            if (news.gap) {
              await stream.writeSSE({
                event: "gap",
                data: "lines may be missing here",
              });
            }
            for (const l of fresh) {
              await stream.writeSSE({
                data: l.text,
                id: lineId(window.epoch, l.seq),
              });
              last = l.seq;
            }
          }
        } finally {
          watch.close();
        }
      });
    }),
  );

  for (
    const [verb, intent] of [["cordon", "cordoned"], ["uncordon", "none"], [
      "drain",
      "draining",
    ]] as const
  ) {
    app.post(
      `/ui/nodes/:id/${verb}`,
      guarded("action", async (c) => {
        const node = await cp.nodes.setIntent(
          param(c, "id"),
          intent satisfies NodeIntent,
        );
        return c.json({ node: node.id, state: node.state }, 200, {
          "hx-trigger": "fleet-changed",
        });
      }),
    );
  }
  app.post(
    "/ui/deployments/:name/scale",
    guarded("action", async (c) => {
      const form = await formOf(c);
      const raw = (form.replicas ?? "").trim();
      if (!/^\d{1,5}$/.test(raw) || Number(raw) > 10_000) {
        return text(
          c,
          `Cannot scale: replicas must be a whole number from 0 to 10000, got "${raw}"`,
          400,
        );
      }
      const name = param(c, "name");
      await cp.deployments.scale(name, Number(raw));
      return c.json({ deployment: name, replicas: Number(raw) }, 200, {
        "hx-trigger": "deployments-changed",
      });
    }),
  );
  app.get(
    "/ui/*",
    guarded("page", (c) => {
      throw new NotFoundError(`no page ${c.req.path}`);
    }),
  );
  return app;
}

/** The HTTP status of each domain error class, as the API answers them. */
const STATUS: readonly [new (...args: never[]) => ControlError, number][] = [
  [InvalidInputError, 400],
  [ForbiddenError, 403],
  [NotFoundError, 404],
  [ConflictError, 409],
  [AgentUnavailableError, 502],
  [NotSettledError, 503],
];

/** The HTTP status of a domain error. */
function statusOf(e: ControlError): number {
  return STATUS.find(([cls]) => e instanceof cls)?.[1] ?? 400;
}

/** A path parameter the route declares. */
function param(c: Context, name: string): string {
  const v = c.req.param(name);
  if (v === undefined || v === "") {
    throw new NotFoundError(`no ${name} in ${c.req.path}`);
  }
  return v;
}

/** A shard rank from the query: one the replica has, default its first. */
function rankOf(raw: string | undefined, ranks: number[]): number {
  if (raw === undefined || raw === "") return ranks[0] ?? 0;
  const rank = Number(raw);
  if (!/^\d{1,4}$/.test(raw) || !ranks.includes(rank)) {
    throw new NotFoundError(`this replica has no shard of rank ${raw}`);
  }
  return rank;
}

/** A urlencoded or multipart body's string fields, read once per request. */
async function formOf(c: Context): Promise<Record<string, string | undefined>> {
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
