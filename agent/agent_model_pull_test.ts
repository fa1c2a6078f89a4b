/**
 * The agent pulls a model revision its desired state asks for, with no
 * shard (issue #25 item 5: `llmgw models pull`, a rollout's pre-pull), from
 * the fake hub on a real port into its model cache; its heartbeats report
 * the revision downloading then complete, with the room under the high
 * watermark; no engine is started. A pull of a commit the hub does not
 * know is reported failed in the heartbeats, with the hub's words and the
 * request it failed under, tried again under a new request, and reported
 * until the desired state drops it. Every server and the agent are stopped in a
 * `finally`.
 */
import { startFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../dev/fake_hub/synthetic_model.ts";
import { HeartbeatRequestSchema } from "../protocol/agent_protocol.ts";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { agentOptions, StubControl } from "../tests/stub_control.ts";
import { until } from "../tests/until.ts";
import { Agent } from "./agent.ts";

const WAIT = { timeoutMs: 60_000, intervalMs: 20 };

/** An agent on `stub` whose model cache lies under `stateDir`, pulling from the hub at `endpoint`. */
function cachingAgent(
  stub: StubControl,
  stateDir: string,
  endpoint: string,
  logs: string[],
): Agent {
  return new Agent({
    ...agentOptions(stub.url, stub.joinToken, stateDir, logs),
    models: {
      cache: {
        root: `${stateDir}/models`,
        rateBytesPerSecond: null,
        watermarks: { highPercent: 99, lowPercent: 98 },
      },
      hub: { endpoint },
    },
  });
}

Deno.test("agent: a desired pull is fetched into the cache without a shard; heartbeats report it held", async () => {
  const model = await syntheticModel({ repo: "acme/pulled", shards: 2, weightBytes: 2 ** 20 });
  const hub = startFakeHub({ repos: [model], tokens: [] });
  const stub = new StubControl();
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_agent_pull_" });
  const logs: string[] = [];
  stub.start();
  const agent = cachingAgent(stub, stateDir, hub.endpoint, logs);
  try {
    await agent.start();
    await until("registration", () => stub.registrations[0], WAIT);
    const commit = model.refs.main;
    stub.publish(1, [], { models: [{ model: "acme/pulled", commit, pinned: true, pull: true }] });
    const held = await until("the revision reported held", () => {
      const hb = stub.lastHeartbeat()?.body;
      const r = hb?.model_cache?.revisions.find((x) => x.repo === "acme/pulled");
      return r?.state === "complete" ? { hb: hb!, r } : undefined;
    }, WAIT);
    assertOk(HeartbeatRequestSchema.safeParse(held.hb).success);
    assertEquals([held.r.commit, held.r.pinned], [commit, true]);
    assertOk(held.r.bytes > 2 ** 20, `its bytes: ${held.r.bytes}`);
    assertOk((held.hb.model_cache!.room_bytes ?? -1) >= 0);
    assertEquals(held.hb.shards, [], "no shard, no engine");
    assertOk(
      Deno.statSync(`${stateDir}/models/models--acme--pulled/snapshots/${commit}/config.json`)
        .isFile,
    );
    assertOk(logs.some((l) => l.includes("model pulled")), "the pull is logged");
  } finally {
    await agent.stop({ stopEngines: true }).catch(() => {});
    await stub.close();
    await hub.stop();
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test("agent: a pull of a commit the hub does not know is reported failed, with the hub's answer, until dropped", async () => {
  const model = await syntheticModel({ repo: "acme/pulled", shards: 1, weightBytes: 2 ** 16 });
  const hub = startFakeHub({ repos: [model], tokens: [] });
  const stub = new StubControl();
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_agent_pull_" });
  stub.start();
  const agent = cachingAgent(stub, stateDir, hub.endpoint, []);
  try {
    await agent.start();
    await until("registration", () => stub.registrations[0], WAIT);
    const unknown = "f".repeat(40);
    const asked = (requested_at: number) => ({
      models: [{ model: "acme/pulled", commit: unknown, pinned: false, pull: true, requested_at }],
    });
    stub.publish(1, [], asked(1));
    const failed = await until("the failure in a heartbeat", () => {
      const hb = stub.lastHeartbeat()?.body;
      return hb?.model_cache?.pulls_failed?.length ? hb : undefined;
    }, WAIT);
    assertOk(HeartbeatRequestSchema.safeParse(failed).success);
    const [f] = failed.model_cache!.pulls_failed!;
    assertEquals([f.repo, f.commit, f.kind], ["acme/pulled", unknown, "revision_not_found"]);
    assertEquals(f.message, `model acme/pulled revision ${unknown} not found on ${hub.endpoint}`);
    assertEquals(f.requested_at, 1, "names the request it failed under");
    // Pulled again before the agent saw it dropped: tried again, and the new failure names it.
    stub.publish(2, [], asked(2));
    await until("the new request's failure in a heartbeat", () => {
      const hb = stub.lastHeartbeat()?.body;
      return hb?.model_cache?.pulls_failed?.[0]?.requested_at === 2 ? hb : undefined;
    }, WAIT);
    // Dropped from the desired state (the control plane marked it failed): no longer sent.
    stub.publish(3, [], { models: [] });
    await until("no failure in a later heartbeat", () => {
      const hb = stub.lastHeartbeat()?.body;
      return hb?.generation === 3 && hb.model_cache?.pulls_failed === undefined ? hb : undefined;
    }, WAIT);
  } finally {
    await agent.stop({ stopEngines: true }).catch(() => {});
    await stub.close();
    await hub.stop();
    await Deno.remove(stateDir, { recursive: true });
  }
});
