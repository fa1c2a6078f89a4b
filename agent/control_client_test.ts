/**
 * The control-plane client against small Hono servers: typed errors with
 * the server's `{error: {code, message}}`, defensive parsing of answers
 * from another version, timeouts, aborts and refused connections. Every
 * server is shut down in a `finally`.
 */
import { Hono } from "hono";
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "../tests/assert.ts";
import type { ShardLaunch } from "../engines/types.ts";
import { shardLaunch } from "../tests/shard_launch.ts";
import { AGENT_PROTOCOL_VERSION, type RegisterRequest } from "../protocol/agent_protocol.ts";
import { ControlClient, ControlError, DEFAULT_HEARTBEAT_INTERVAL_MS } from "./control_client.ts";

const JOIN = "join-token-0123456789";
const NODE = "node-token-0123456789";

const REQ: RegisterRequest = {
  protocol: AGENT_PROTOCOL_VERSION,
  node_id: "n1",
  hostname: "n1",
  mgmt_addr: "10.0.0.1",
  mgmt_interface: "eth0",
  agent_url: null,
  labels: {},
  gpus: [],
  fabrics: [],
  agent_version: "test",
  engine_versions: {},
};

/** A one-GPU shard's launch, as the control plane builds it. */
function launch(id: string): ShardLaunch {
  return shardLaunch(id, 8000, {
    replica_id: "demo-r0",
    world: { nodes: 1, leader_addr: "10.0.0.1", rendezvous_port: 29500, leader_http_port: 8000 },
    node: { id: "n1", mgmt_addr: "10.0.0.1", mgmt_interface: "eth0" },
  });
}

async function withServer(
  app: Hono,
  fn: (url: string) => Promise<void>,
  release?: () => void,
): Promise<void> {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, app.fetch);
  try {
    await fn(`http://127.0.0.1:${server.addr.port}/prefix`);
  } finally {
    release?.();
    await server.shutdown();
  }
}

Deno.test("client: sends the right token to each endpoint and tolerates extra or missing fields", async () => {
  const seen: string[] = [];
  const app = new Hono();
  app.post("/prefix/v1/agent/register", (c) => {
    seen.push(`register ${c.req.header("authorization")}`);
    return c.json({ node_token: NODE, extra: { from: "the future" } });
  });
  app.post("/prefix/v1/agent/heartbeat", (c) => {
    seen.push(`heartbeat ${c.req.header("authorization")}`);
    return c.json({});
  });
  app.get("/prefix/v1/agent/desired", (c) => {
    seen.push(`desired ${c.req.header("authorization")} ${c.req.url.split("?")[1]}`);
    if (c.req.query("generation") === "7") return c.body(null, 204);
    return c.json({
      generation: 8,
      shards: [{ id: "s", engine: "vllm", launch: { ...launch("s"), anything: true } }],
      note: "ignored",
    });
  });
  await withServer(app, async (url) => {
    const client = new ControlClient({ url, joinToken: JOIN });
    const reg = await client.register(REQ);
    assertEquals(reg, {
      node_id: "n1",
      node_token: NODE,
      heartbeat_interval_ms: DEFAULT_HEARTBEAT_INTERVAL_MS,
    });
    assertEquals(client.nodeToken, NODE);
    assertEquals(
      await client.heartbeat({ node_id: "n1", generation: 0, shards: [] }),
      { generation: null, metricsTokenHashes: null },
    );
    assertEquals(await client.desired(7, 1000), null);
    const state = await client.desired(0, 1000);
    assertEquals(state?.generation, 8);
    assertEquals(state?.shards[0].launch, launch("s"), "fields it does not know are dropped");
  });
  assertEquals(seen, [
    `register Bearer ${JOIN}`,
    `heartbeat Bearer ${NODE}`,
    `desired Bearer ${NODE} generation=7&wait_ms=1000`,
    `desired Bearer ${NODE} generation=0&wait_ms=1000`,
  ]);
});

Deno.test("client: HTTP errors carry the status and the server's code and message", async () => {
  const app = new Hono();
  app.post(
    "/prefix/v1/agent/register",
    (c) => c.json({ error: { code: "bad_join_token", message: "unknown join token" } }, 401),
  );
  app.post("/prefix/v1/agent/heartbeat", (c) => c.text("<html>bad gateway</html>", 502));
  await withServer(app, async (url) => {
    const client = new ControlClient({ url, joinToken: JOIN, nodeToken: NODE });
    const e = await assertRejects(() => client.register(REQ), ControlError) as ControlError;
    assertEquals([e.kind, e.status, e.code, e.serverMessage], [
      "http",
      401,
      "bad_join_token",
      "unknown join token",
    ]);
    assertOk(e.unauthorized);
    assertStringIncludes(e.message, "401 bad_join_token: unknown join token");
    assertOk(!e.message.includes(JOIN), "no token in messages");
    const proxy = await assertRejects(
      () => client.heartbeat({ node_id: "n1", generation: 0, shards: [] }),
      ControlError,
    ) as ControlError;
    assertEquals([proxy.kind, proxy.status, proxy.code, proxy.unauthorized], [
      "http",
      502,
      null,
      false,
    ]);
    assertStringIncludes(proxy.message, "bad gateway");
  });
});

Deno.test("client: answers it cannot use are bad_response errors naming the field", async () => {
  const app = new Hono();
  app.post("/prefix/v1/agent/register", (c) => c.json({ node_token: 42 }));
  app.post("/prefix/v1/agent/heartbeat", (c) => c.text("not json"));
  app.get(
    "/prefix/v1/agent/desired",
    (c) => c.json({ generation: 3, shards: [{ id: "s", engine: "vllm", launch: "oops" }] }),
  );
  await withServer(app, async (url) => {
    const client = new ControlClient({ url, joinToken: JOIN, nodeToken: NODE });
    const reg = await assertRejects(() => client.register(REQ), ControlError, "node_token");
    assertEquals((reg as ControlError).kind, "bad_response");
    await assertRejects(
      () => client.heartbeat({ node_id: "n1", generation: 0, shards: [] }),
      ControlError,
      "not JSON",
    );
    await assertRejects(
      () => client.desired(0, 10),
      ControlError,
      'desired: unusable answer from the control plane: shards[0].launch (shard "s"): ',
    );
  });
  // Too large.
  const big = new Hono();
  big.post("/prefix/v1/agent/heartbeat", (c) => c.text("x".repeat(5000)));
  await withServer(big, async (url) => {
    const client = new ControlClient({ url, joinToken: JOIN, nodeToken: NODE, maxBodyBytes: 1000 });
    await assertRejects(
      () => client.heartbeat({ node_id: "n1", generation: 0, shards: [] }),
      ControlError,
      "larger than 1000 bytes",
    );
  });
});

Deno.test("client: timeouts, aborts, refused connections and a missing node token", async () => {
  let release = () => {};
  const hold = new Promise<void>((r) => (release = r));
  const app = new Hono();
  app.post("/prefix/v1/agent/heartbeat", async (c) => {
    await hold;
    return c.json({ generation: 1 });
  });
  app.get("/prefix/v1/agent/desired", async (c) => {
    await hold;
    return c.json({ generation: 1, shards: [] });
  });
  await withServer(app, async (url) => {
    const client = new ControlClient({ url, joinToken: JOIN, nodeToken: NODE, timeoutMs: 100 });
    const t = await assertRejects(
      () => client.heartbeat({ node_id: "n1", generation: 0, shards: [] }),
      ControlError,
      "no answer within 100 ms",
    );
    assertEquals((t as ControlError).kind, "timeout");
    const ctl = new AbortController();
    const pending = client.desired(0, 30_000, ctl.signal);
    ctl.abort();
    const a = await assertRejects(() => pending, ControlError);
    assertEquals((a as ControlError).kind, "aborted");
  }, () => release());

  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  const down = new ControlClient({ url: `http://127.0.0.1:${port}`, joinToken: JOIN });
  const n = await assertRejects(() => down.register(REQ), ControlError);
  assertEquals((n as ControlError).kind, "network");
  const u = await assertRejects(() => down.desired(0, 10), ControlError, "not registered");
  assertOk((u as ControlError).unauthorized, "no node token: register first");
});

Deno.test("client: a desired state with a bad launch is refused whole, naming the shard and field", async () => {
  const bad = { ...launch("s2"), port: 0, gpus: [] };
  const app = new Hono();
  app.get("/prefix/v1/agent/desired", (c) =>
    c.json({
      generation: 5,
      shards: [
        { id: "s1", engine: "vllm", launch: launch("s1") },
        { id: "s2", engine: "vllm", launch: bad },
      ],
    }));
  await withServer(app, async (url) => {
    const client = new ControlClient({ url, joinToken: JOIN, nodeToken: NODE });
    const e = await assertRejects(() => client.desired(0, 10), ControlError) as ControlError;
    assertEquals(e.kind, "bad_response");
    assertStringIncludes(e.message, 'shards[1].launch.gpus (shard "s2"): Too small');
    assertStringIncludes(e.message, 'shards[1].launch.port (shard "s2"): Too small');
  });
});
