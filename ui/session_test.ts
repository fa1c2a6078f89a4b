import { Hono } from "hono";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { ApiError } from "../control/api_error.ts";
import type { Authorizer } from "../control/api/route.ts";
import {
  CsrfTokens,
  originProblem,
  presentedToken,
  safeNext,
  servedOverHttps,
  SESSION_COOKIE,
  standingOf,
} from "./session.ts";

Deno.test("originProblem: only the dashboard's own origin, or same-origin fetches without an Origin", () => {
  const url = "https://10.0.0.5:7070/ui/nodes/n1/cordon";
  const table: [string | undefined, string | undefined, string | null][] = [
    ["https://10.0.0.5:7070", undefined, null],
    ["https://10.0.0.5:7070", "cross-site", null],
    [
      "http://10.0.0.5:7070",
      undefined,
      "Origin http://10.0.0.5:7070 is not this dashboard's",
    ],
    [
      "https://10.0.0.5:7071",
      undefined,
      "is not this dashboard's (https://10.0.0.5:7070)",
    ],
    ["https://evil.example", "same-origin", "Origin https://evil.example"],
    ["null", undefined, "Origin null"],
    [undefined, "same-origin", null],
    [undefined, "same-site", "Sec-Fetch-Site is same-site, not same-origin"],
    [undefined, "cross-site", "Sec-Fetch-Site is cross-site"],
    [undefined, undefined, "neither an Origin nor a Sec-Fetch-Site header"],
  ];
  for (const [origin, site, want] of table) {
    const got = originProblem(url, origin, site);
    if (want === null) assertEquals(got, null, `${origin} ${site}`);
    else {assertOk(
        got !== null && got.includes(want),
        `${origin} ${site}: ${got}`,
      );}
  }
});

Deno.test("CsrfTokens: a session's token matches only that session, under this key", async () => {
  const csrf = new CsrfTokens(new Uint8Array(32).fill(7));
  const a = await csrf.of("llmgw_admin_a");
  assertEquals(await csrf.of("llmgw_admin_a"), a, "stable per session");
  assertOk(await csrf.matches("llmgw_admin_a", a));
  assertOk(!await csrf.matches("llmgw_admin_b", a), "another session's");
  assertOk(!await csrf.matches("llmgw_admin_a", undefined));
  assertOk(!await csrf.matches("llmgw_admin_a", ""));
  assertOk(!await csrf.matches("llmgw_admin_a", a.slice(1)));
  assertOk(
    !await new CsrfTokens(new Uint8Array(32).fill(8)).matches(
      "llmgw_admin_a",
      a,
    ),
    "another key",
  );
  assertOk(
    !a.includes("llmgw_admin_a"),
    "the CSRF token does not carry the session's token",
  );
});

Deno.test("safeNext: only paths under /ui/ come back after sign-in", () => {
  const table: [string | undefined, string][] = [
    [undefined, "/ui/"],
    ["/ui/deployments", "/ui/deployments"],
    ["/ui/?state=ready&page=2", "/ui/?state=ready&page=2"],
    ["https://evil.example/ui/", "/ui/"],
    ["//evil.example/ui/", "/ui/"],
    ["/ui\\..\\evil", "/ui/"],
    ["/v1/nodes", "/ui/"],
    ["", "/ui/"],
  ];
  for (const [next, want] of table) {
    assertEquals(safeNext(next), want, String(next));
  }
});

Deno.test("presentedToken: the Authorization header wins over the cookie; a malformed header is none", async () => {
  const app = new Hono();
  app.get("/", (c) => c.json(presentedToken(c)));
  const ask = async (headers: Record<string, string>) =>
    await (await app.request("/", { headers })).json();
  assertEquals(await ask({}), null);
  assertEquals(await ask({ cookie: `${SESSION_COOKIE}=tok1` }), {
    token: "tok1",
    via: "cookie",
  });
  assertEquals(
    await ask({
      authorization: "Bearer tok2",
      cookie: `${SESSION_COOKIE}=tok1`,
    }),
    {
      token: "tok2",
      via: "header",
    },
  );
  assertEquals(
    await ask({ authorization: "Basic abc", cookie: `${SESSION_COOKIE}=tok1` }),
    null,
  );
  assertEquals(await ask({ cookie: `${SESSION_COOKIE}=` }), null);
});

Deno.test("standingOf: the API's authorizer decides — pass is admin, 403 refused, 401 unknown", async () => {
  const authorize: Authorizer = (kind, c) => {
    assertEquals(kind, "admin");
    const h = c.req.header("authorization");
    if (h === "Bearer good") return Promise.resolve();
    if (h === "Bearer gw") {
      return Promise.reject(
        new ApiError(403, "forbidden", "a gateway token …"),
      );
    }
    return Promise.reject(new ApiError(401, "unauthorized", "unknown"));
  };
  assertEquals(await standingOf(authorize, "good"), { kind: "admin" });
  assertEquals(await standingOf(authorize, "gw"), {
    kind: "refused",
    message: "a gateway token …",
  });
  assertEquals((await standingOf(authorize, "x")).kind, "unknown");
});

Deno.test("servedOverHttps: from the request's own URL", () => {
  assertOk(servedOverHttps("https://127.0.0.1:7070/ui/"));
  assertOk(!servedOverHttps("http://127.0.0.1:7070/ui/"));
});

Deno.test("originProblem: a proxy's X-Forwarded-Host is the dashboard's origin too", () => {
  const leader = "https://10.0.0.2:7070/ui/sign-in";
  assertEquals(
    originProblem(leader, "https://10.0.0.1:7070", undefined, "10.0.0.1:7070"),
    null,
  );
  assertOk(
    originProblem(leader, "https://evil.example", undefined, "10.0.0.1:7070") !== null,
    "another origin is still refused",
  );
  assertOk(
    originProblem(leader, "http://10.0.0.1:7070", undefined, "10.0.0.1:7070") !== null,
    "the scheme must match",
  );
});
