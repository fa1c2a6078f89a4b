/**
 * A follower's answers without a leader to reach, and forwarding to one
 * (a local server, stopped by the test).
 */
import { assertEquals } from "../tests/assert.ts";
import {
  FORWARDED_BY_HEADER,
  LEADER_HEADER,
  type Leadership,
  READ_ONLY_HEADER,
} from "../protocol/leadership.ts";
import { Follower, type FollowerView } from "./ha_follower.ts";

const READ_ONLY: Leadership = {
  mode: "shared",
  role: "read_only",
  holder: "b",
  epoch: 3,
  leader: null,
  reason: "the store db is unreachable",
};

/** A view with no leader; `local` answers 200 "local PATH" when given. */
function view(local: boolean, leaderUrl: string | null = null): FollowerView {
  return {
    local: local ? { fetch: (req) => new Response(`local ${new URL(req.url).pathname}`) } : null,
    leaderUrl: () => leaderUrl,
    leadership: () => READ_ONLY,
  };
}

Deno.test("with no leader: own paths, reads marked read-only, the rest 503 not_leader", async () => {
  const f = new Follower("b", null, () => {});
  const url = (p: string) => `http://127.0.0.1:1${p}`;
  const cases: [string, string, boolean, number, string | null][] = [
    // method, path, last known state loaded, status, read-only header
    ["GET", "/healthz", false, 200, null],
    ["GET", "/v1/leader", false, 200, null],
    ["GET", "/metrics", true, 200, null],
    ["GET", "/v1/nodes", true, 200, "the store db is unreachable"],
    ["GET", "/v1/nodes", false, 503, null],
    ["POST", "/v1/deployments", true, 503, null],
    // Never from old state: it would steer agents and gateways.
    ["GET", "/v1/endpoints", true, 503, null],
    ["GET", "/v1/agent/desired", true, 503, null],
  ];
  for (const [method, path, loaded, status, readOnly] of cases) {
    const res = await f.answer(new Request(url(path), { method }), view(loaded));
    assertEquals(res.status, status, `${method} ${path}`);
    assertEquals(res.headers.get(READ_ONLY_HEADER), readOnly, `${method} ${path}`);
    const body = await res.text();
    if (status === 503) assertEquals(JSON.parse(body).error.code, "not_leader");
  }
  const leader = await f.answer(new Request(url("/v1/leader")), view(false));
  assertEquals(await leader.json(), READ_ONLY);
});

Deno.test("with a leader: forwarded once, answered with the leader's URL; unreachable: read-only", async () => {
  const seen: (string | null)[] = [];
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => {} }, (req) => {
    seen.push(req.headers.get(FORWARDED_BY_HEADER));
    return new Response(`leader ${new URL(req.url).pathname}`);
  });
  try {
    const leaderUrl = `http://127.0.0.1:${server.addr.port}`;
    const f = new Follower("b", null, () => {});
    const res = await f.answer(new Request("http://x/v1/nodes"), view(true, leaderUrl));
    assertEquals(await res.text(), "leader /v1/nodes");
    assertEquals(res.headers.get(LEADER_HEADER), leaderUrl);
    assertEquals(seen, ["b"]);
    // Forwarded to this instance already: never forwarded again.
    const again = await f.answer(
      new Request("http://x/v1/nodes", { headers: { [FORWARDED_BY_HEADER]: "a" } }),
      view(true, leaderUrl),
    );
    assertEquals(await again.text(), "local /v1/nodes");
    assertEquals(seen.length, 1);
  } finally {
    await server.shutdown();
  }
  const logged: string[] = [];
  const gone = new Follower("b", null, (l) => logged.push(l));
  const res = await gone.answer(
    new Request("http://x/v1/nodes"),
    view(true, `http://127.0.0.1:${server.addr.port}`),
  );
  assertEquals(await res.text(), "local /v1/nodes");
  assertEquals(res.headers.get(READ_ONLY_HEADER), "the store db is unreachable");
  assertEquals(logged.length, 1);
});
