/**
 * The dashboard through the control plane's app (`app.request`, no socket):
 * sign-in and its cookie, what each kind of caller sees, CSRF on actions,
 * page sizes on a 1,000-node fleet, and the log stream's resume.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, registerNodes, testControl } from "../tests/control_fixture.ts";
import { registration } from "../tests/registration.ts";
import { createControlApi } from "../control/api.ts";
import type { Fetch } from "../control/agent_logs.ts";
import type { ControlPlane } from "../control/control_plane.ts";
import { hashToken, newToken } from "../http/tokens.ts";
import { ASSETS } from "./assets.ts";
import { CSRF_HEADER, SESSION_COOKIE } from "./session.ts";
import { uiApp } from "./ui_app.tsx";

const ORIGIN = "https://127.0.0.1:7070";

async function dashboard(cp: ControlPlane) {
  const admin = newToken("llmgw_admin");
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken(admin)],
    joinTokenHashes: [],
  }, uiApp);
  const gateway = (await cp.tokens.create({ kind: "gateway" })).token;
  const request = (path: string, init: RequestInit = {}) => app.request(`${ORIGIN}${path}`, init);
  return { app, admin, gateway, request };
}

/** Signs in through the form; returns the cookie header to send and the Set-Cookie seen. */
async function signIn(
  request: (p: string, i?: RequestInit) => Response | Promise<Response>,
  token: string,
) {
  const res = await request("/ui/sign-in", {
    method: "POST",
    headers: {
      origin: ORIGIN,
      "content-type": "application/x-www-form-urlencoded",
    },
    body: new URLSearchParams({ token, next: "/ui/deployments" }).toString(),
  });
  const setCookie = res.headers.get("set-cookie") ?? "";
  await res.body?.cancel();
  return { res, setCookie, cookie: setCookie.split(";")[0] };
}

function csrfOf(html: string): string {
  const m = /hx-headers="\{&quot;x-llmgw-csrf&quot;:&quot;([^&]+)&quot;\}"/
    .exec(html);
  if (m === null) throw new Error("no CSRF token in the page");
  return m[1];
}

Deno.test("ui: without a token every page is the sign-in form with no fleet data; fragments and actions are 401", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["secret-node-1"]);
  const { request } = await dashboard(cp);
  for (
    const path of [
      "/ui/",
      "/ui/deployments",
      "/ui/replicas/x",
      "/ui/?state=ready",
      "/ui/nope",
    ]
  ) {
    const res = await request(path);
    const html = await res.text();
    assertEquals(res.status, 401, path);
    assertStringIncludes(html, 'action="/ui/sign-in"');
    assertOk(!html.includes("secret-node-1"), `${path} shows no node`);
    assertEquals(res.headers.get("x-frame-options"), "DENY");
  }
  for (
    const [method, path] of [
      ["GET", "/ui/fragments/fleet"],
      ["GET", "/ui/fragments/deployments"],
      ["GET", "/ui/replicas/x/logs"],
      ["POST", "/ui/nodes/secret-node-1/cordon"],
      ["POST", "/ui/deployments/x/scale"],
    ]
  ) {
    const res = await request(path, { method, headers: { origin: ORIGIN } });
    const body = await res.text();
    assertEquals(res.status, 401, path);
    assertEquals(res.headers.get("hx-refresh"), "true", path);
    assertOk(!body.includes("secret-node-1"));
  }
  assertEquals(cp.nodes.get("secret-node-1").state, "ready");
});

Deno.test("ui: signing in sets an HttpOnly, SameSite=Strict, Secure cookie scoped to /ui; sign-out clears it", async () => {
  const { cp } = await testControl();
  const { admin, request, app } = await dashboard(cp);
  const { res, setCookie, cookie } = await signIn(request, admin);
  assertEquals(res.status, 303);
  assertEquals(res.headers.get("location"), "/ui/deployments");
  for (
    const part of [
      "HttpOnly",
      "SameSite=Strict",
      "Secure",
      "Path=/ui",
      "Max-Age=43200",
    ]
  ) {
    assertStringIncludes(setCookie, part);
  }
  assertEquals(cookie, `${SESSION_COOKIE}=${admin}`);
  // Over plain HTTP (`--insecure-http`) the cookie cannot be Secure.
  const plain = await app.request("http://127.0.0.1:7070/ui/sign-in", {
    method: "POST",
    headers: {
      origin: "http://127.0.0.1:7070",
      "content-type": "application/x-www-form-urlencoded",
    },
    body: `token=${encodeURIComponent(admin)}`,
  });
  assertEquals(plain.status, 303);
  assertOk(!(plain.headers.get("set-cookie") ?? "").includes("Secure"));
  // The page names no token; the CSRF token is not the session's.
  const page = await request("/ui/", { headers: { cookie } });
  const html = await page.text();
  assertEquals(page.status, 200);
  assertOk(!html.includes(admin), "the token is not in the page");
  const csrf = csrfOf(html);
  assertOk(!admin.includes(csrf));
  // Sign-out needs the CSRF token too, then clears the cookie.
  const refused = await request("/ui/sign-out", {
    method: "POST",
    headers: { cookie, origin: ORIGIN },
  });
  assertEquals(refused.status, 403);
  await refused.body?.cancel();
  const out = await request("/ui/sign-out", {
    method: "POST",
    headers: { cookie, origin: ORIGIN, [CSRF_HEADER]: csrf },
  });
  assertEquals(out.status, 303);
  assertEquals(out.headers.get("location"), "/ui/sign-in");
  assertStringIncludes(
    out.headers.get("set-cookie") ?? "",
    `${SESSION_COOKIE}=;`,
  );
  assertStringIncludes(out.headers.get("set-cookie") ?? "", "Max-Age=0");
});

Deno.test("ui: the sign-in form refuses empty, unknown and non-admin tokens, naming why, never echoing them", async () => {
  const { cp } = await testControl();
  const { gateway, request } = await dashboard(cp);
  const unknown = newToken("llmgw_admin");
  const cases: [string, number, string][] = [
    ["", 400, "the token is empty"],
    ["a b", 400, "not a token"],
    [unknown, 401, "unknown, expired or revoked"],
    [gateway, 403, "a gateway token may not call this route"],
  ];
  for (const [token, status, text] of cases) {
    const res = await request("/ui/sign-in", {
      method: "POST",
      headers: {
        origin: ORIGIN,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ token }).toString(),
    });
    const html = await res.text();
    assertEquals(res.status, status, text);
    assertStringIncludes(html, text);
    assertEquals(res.headers.get("set-cookie"), null, "no cookie");
    assertOk(token === "" || !html.includes(token), "not echoed");
  }
  // A sign-in posted from another site is refused before the token is looked at.
  const cross = await request("/ui/sign-in", {
    method: "POST",
    headers: {
      origin: "https://evil.example",
      "content-type": "application/x-www-form-urlencoded",
    },
    body: "token=x",
  });
  assertEquals(cross.status, 403);
  await cross.body?.cancel();
});

Deno.test("ui: a valid token of another kind is refused with a page saying so; a revoked session is signed out", async () => {
  const { cp } = await testControl();
  const { gateway, request } = await dashboard(cp);
  for (
    const headers of [
      { authorization: `Bearer ${gateway}` },
      { cookie: `${SESSION_COOKIE}=${gateway}` },
    ] as Record<string, string>[]
  ) {
    const res = await request("/ui/", { headers });
    const html = await res.text();
    assertEquals(res.status, 403);
    assertStringIncludes(html, "This token may not use the dashboard");
    assertOk(!html.includes(gateway));
    const frag = await request("/ui/fragments/fleet", { headers });
    assertEquals(frag.status, 403);
    await frag.body?.cancel();
  }
  const stored = await cp.tokens.create({ kind: "admin" });
  const cookie = `${SESSION_COOKIE}=${stored.token}`;
  assertEquals((await request("/ui/", { headers: { cookie } })).status, 200);
  await cp.tokens.revoke(stored.token.split(".")[1]);
  const after = await request("/ui/", { headers: { cookie } });
  assertEquals(after.status, 401);
  assertStringIncludes(await after.text(), "unknown, expired or revoked");
  assertStringIncludes(after.headers.get("set-cookie") ?? "", "Max-Age=0");
});

Deno.test("ui: actions from a cookie session need this session's CSRF token and the dashboard's origin; Bearer scripts need neither", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1", "n2"]);
  const { admin, request } = await dashboard(cp);
  const { cookie } = await signIn(request, admin);
  const csrf = csrfOf(
    await (await request("/ui/", { headers: { cookie } })).text(),
  );
  const other = await cp.tokens.create({ kind: "admin" });
  const { cookie: otherCookie } = await signIn(request, other.token);
  const otherCsrf = csrfOf(
    await (await request("/ui/", { headers: { cookie: otherCookie } })).text(),
  );
  const post = (path: string, headers: Record<string, string>, body?: string) =>
    request(path, {
      method: "POST",
      headers: body === undefined
        ? headers
        : { ...headers, "content-type": "application/x-www-form-urlencoded" },
      body,
    });
  const refused: [string, Record<string, string>, string?][] = [
    ["no CSRF token", { cookie, origin: ORIGIN }],
    ["another session's", { cookie, origin: ORIGIN, [CSRF_HEADER]: otherCsrf }],
    ["a wrong one", { cookie, origin: ORIGIN, [CSRF_HEADER]: "x".repeat(43) }],
    ["another origin", {
      cookie,
      origin: "https://evil.example",
      [CSRF_HEADER]: csrf,
    }],
    ["no origin", { cookie, [CSRF_HEADER]: csrf }],
    ["cross-site fetch", {
      cookie,
      "sec-fetch-site": "cross-site",
      [CSRF_HEADER]: csrf,
    }],
  ];
  for (const [what, headers] of refused) {
    const res = await post("/ui/nodes/n1/cordon", headers);
    assertEquals(res.status, 403, what);
    assertStringIncludes(await res.text(), "Cannot act");
  }
  assertEquals(
    cp.nodes.get("n1").state,
    "ready",
    "refused actions change nothing",
  );
  const ok = await post("/ui/nodes/n1/cordon", {
    cookie,
    origin: ORIGIN,
    [CSRF_HEADER]: csrf,
  });
  assertEquals(ok.status, 200);
  assertEquals(ok.headers.get("hx-trigger"), "fleet-changed");
  assertEquals(await ok.json(), { node: "n1", state: "cordoned" });
  // A plain form carries the token as a field instead.
  const form = await post(
    "/ui/nodes/n1/uncordon",
    { cookie, "sec-fetch-site": "same-origin" },
    `_csrf=${csrf}`,
  );
  assertEquals(form.status, 200);
  await form.body?.cancel();
  assertEquals(cp.nodes.get("n1").state, "ready");
  const script = await post("/ui/nodes/n2/drain", {
    authorization: `Bearer ${admin}`,
  });
  assertEquals(script.status, 200);
  await script.body?.cancel();
  assertEquals(cp.nodes.get("n2").state, "draining");
  const missing = await post("/ui/nodes/nope/cordon", {
    authorization: `Bearer ${admin}`,
  });
  assertEquals(missing.status, 404);
  assertStringIncludes(await missing.text(), "no node nope");
});

Deno.test("ui: scale from the deployments page; a bad count is a 400 naming the field", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1", "n2", "n3"]);
  await cp.deployments.apply(QWEN);
  await cp.reconcile();
  const { admin, request } = await dashboard(cp);
  const auth = {
    authorization: `Bearer ${admin}`,
    "content-type": "application/x-www-form-urlencoded",
  };
  const page = await (await request("/ui/deployments", { headers: auth }))
    .text();
  assertStringIncludes(page, `hx-post="/ui/deployments/${QWEN.name}/scale"`);
  for (const bad of ["-1", "1.5", "many", "10001", ""]) {
    const res = await request(`/ui/deployments/${QWEN.name}/scale`, {
      method: "POST",
      headers: auth,
      body: `replicas=${bad}`,
    });
    assertEquals(res.status, 400, bad);
    assertStringIncludes(
      await res.text(),
      "replicas must be a whole number from 0 to 10000",
    );
  }
  const res = await request(`/ui/deployments/${QWEN.name}/scale`, {
    method: "POST",
    headers: auth,
    body: "replicas=2",
  });
  assertEquals(res.status, 200);
  assertEquals(await res.json(), { deployment: QWEN.name, replicas: 2 });
  assertEquals(cp.deployments.get(QWEN.name).spec.replicas, 2);
  const gone = await request("/ui/deployments/nope/scale", {
    method: "POST",
    headers: auth,
    body: "replicas=2",
  });
  assertEquals(gone.status, 404);
  await gone.body?.cancel();
});

Deno.test("ui: on a 1,000-node fleet (8,000 GPUs) every page is at most 100 KB with its assets, and the fleet page is paged", async () => {
  const { cp } = await testControl();
  const ids = Array.from(
    { length: 1000 },
    (_, i) => `gpu-node-${String(i).padStart(4, "0")}`,
  );
  await registerNodes(cp, ids);
  await cp.deployments.apply({ ...QWEN, replicas: 40 });
  await cp.reconcile();
  const replica = cp.replicas()[0].id;
  const { admin, request } = await dashboard(cp);
  const headers = {
    authorization: `Bearer ${admin}`,
    "accept-encoding": "gzip",
  };
  // Each asset as sent to a browser that takes gzip.
  let assets = 0;
  for (const a of Object.values(ASSETS)) {
    const res = await request(`/ui/assets/${a.name}`, { headers });
    assertEquals(res.headers.get("content-encoding"), "gzip");
    assets += (await res.arrayBuffer()).byteLength;
  }
  for (
    const path of [
      "/ui/",
      "/ui/?page=20",
      "/ui/?group=state",
      "/ui/deployments",
      `/ui/replicas/${replica}`,
    ]
  ) {
    const res = await request(path, { headers });
    const html = await res.arrayBuffer();
    assertEquals(res.status, 200, path);
    // The page itself counted uncompressed: the most it can take on the wire.
    const total = html.byteLength + assets;
    assertOk(
      total <= 100 * 1024,
      `${path}: ${html.byteLength} + ${assets} assets = ${total} bytes`,
    );
  }
  const fleet = await (await request("/ui/", { headers })).text();
  assertStringIncludes(fleet, "1000 of 1000 nodes match");
  assertStringIncludes(fleet, "page 1 of 20");
  assertEquals(fleet.match(/<tr data-node=/g)?.length, 50);
  assertStringIncludes(fleet, "gpu-node-0049");
  assertOk(!fleet.includes("gpu-node-0050"));
});

/** An agent whose shard log grows when the test says, for the SSE stream. */
async function withLoggingAgent() {
  const log: string[] = [];
  const fetcher: Fetch = (url) => {
    const lines = Number(new URL(url).searchParams.get("lines"));
    return Promise.resolve(
      Response.json({ id: "s", state: "ready", lines: log.slice(-lines) }),
    );
  };
  const { cp } = await testControl({ fetch: fetcher });
  await cp.nodes.register(
    registration("n1", undefined, {
      agent_url: "http://127.0.0.1:9/",
      agent_token: "llmgw_local_t",
    }),
    null,
  );
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  return { cp, log, replica: cp.replicas()[0].id };
}

/** One server-sent event. */
interface SseEvent {
  event: string;
  data: string;
  id?: string;
}

/** Reads SSE events from a response until `want` returns true; then cancels the stream. */
async function readEvents(
  res: Response,
  want: (events: SseEvent[]) => boolean,
) {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const events: SseEvent[] = [];
  let buffer = "";
  try {
    while (!want(events)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (block.startsWith(":")) continue;
        const e: SseEvent = { event: "message", data: "" };
        for (const line of block.split("\n")) {
          const [k, ...rest] = line.split(": ");
          const v = rest.join(": ");
          if (k === "event") e.event = v;
          if (k === "data") e.data = v;
          if (k === "id") e.id = v;
        }
        events.push(e);
      }
    }
  } finally {
    await reader.cancel();
  }
  return events;
}

Deno.test("ui: the log stream sends each line once with an id, and resumes after Last-Event-ID without duplicates or gaps", async () => {
  const { cp, log, replica } = await withLoggingAgent();
  const { admin, request } = await dashboard(cp);
  const headers = { authorization: `Bearer ${admin}` };
  log.push("loading weights", "weights loaded");
  const lines = (events: SseEvent[]) => events.filter((e) => e.event === "message");
  const first = await request(`/ui/replicas/${replica}/logs`, { headers });
  assertEquals(first.headers.get("content-type"), "text/event-stream");
  // The third line comes while the stream is open.
  let pushed = false;
  const seen = await readEvents(first, (events) => {
    if (lines(events).length === 2 && !pushed) {
      pushed = true;
      log.push("server ready");
    }
    return lines(events).length === 3;
  });
  assertEquals(lines(seen).map((e) => e.data), [
    "loading weights",
    "weights loaded",
    "server ready",
  ]);
  const ids = lines(seen).map((e) => e.id!);
  assertEquals(new Set(ids).size, 3);
  assertOk(
    seen.some((e) => e.event === "status" && e.data.includes("on n1: ready")),
  );
  // Two lines arrive while the reader is away; it resumes from the second line's id.
  log.push("GET /health 200", "POST /v1/chat/completions 200");
  const again = await request(`/ui/replicas/${replica}/logs`, {
    headers: { ...headers, "last-event-id": ids[1] },
  });
  const resumed = await readEvents(
    again,
    (events) => lines(events).length === 3,
  );
  assertEquals(lines(resumed).map((e) => e.data), [
    "server ready",
    "GET /health 200",
    "POST /v1/chat/completions 200",
  ]);
  assertEquals(lines(resumed)[0].id, ids[2], "the same line keeps its id");
  assertOk(!resumed.some((e) => e.event === "gap"));
  // A reader with another window's id gets the whole window, marked as a gap.
  const stale = await request(`/ui/replicas/${replica}/logs`, {
    headers: { ...headers, "last-event-id": "deadbeef.3" },
  });
  const whole = await readEvents(stale, (events) => lines(events).length === 5);
  assertOk(whole.some((e) => e.event === "gap"));
  assertEquals(lines(whole).length, 5);
});
