/**
 * Failure attribution (issue #23 item 8): an engine killed with SIGKILL
 * while traffic flows is reported by its signal, never as a foreign holder
 * of its port, and a `shard_recovered` event closes each failure once it is
 * ready again. Real agent, gateway and fake engines on loopback; every
 * engine group is killed by the fixture, on failure too.
 */
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { until } from "./until.ts";
import { portsOf } from "./port_plan.ts";
import {
  chat,
  oneShardDeployment,
  POLL,
  shardOf,
  untilNodes,
  untilShardReady,
  withPortCluster,
} from "./port_ownership_fixtures.ts";

/** Kills in a row: fewer than the crash-loop limit (5), which would give the node up. */
const KILLS = 3;

Deno.test("kill -9 of an engine with traffic flowing: reported as SIGKILL every time, each failure closed by shard_recovered", async () => {
  await withPortCluster(async (c) => {
    const { agent } = await c.startAgent({
      id: "kill-9",
      ports: portsOf(import.meta.url),
      backoff: { initialMs: 200, maxMs: 1_000, factor: 2 },
    });
    await untilNodes(c, 1);
    assertEquals((await c.admin("POST", "/v1/deployments", oneShardDeployment("k9"))).status, 201);
    let shard = await untilShardReady(agent, "k9");
    c.groups.add(shard.pid!);
    await until(
      "the gateway routes k9",
      async () => (await chat(c.gateway, "k9")).status === 200,
      POLL,
    );
    // Traffic flows throughout: one request after another, bounded, until told to stop.
    let flowing = true;
    const traffic = (async () => {
      for (let i = 0; i < 10_000 && flowing; i++) {
        await chat(c.gateway, "k9").catch(() => {});
      }
    })();
    try {
      for (let k = 1; k <= KILLS; k++) {
        const killed = shard.pid!;
        Deno.kill(killed, "SIGKILL");
        shard = await until(`ready again after kill ${k}`, () => {
          const s = shardOf(agent, "k9");
          if (s?.pid !== null && s?.pid !== undefined) c.groups.add(s.pid);
          return s?.state === "ready" && s.pid !== killed ? s : null;
        }, { ...POLL, describe: () => JSON.stringify(shardOf(agent, "k9")) });
        assertEquals(shard.last_failure?.reason, "killed by signal 9 (SIGKILL)", `kill ${k}`);
        assertEquals(shard.last_failure?.signal, "SIGKILL");
        // The control plane sees it ready again (an operator's next kill is not within 300 ms).
        const at = shard.last_failure?.at;
        await until(`the control plane to see it ready after kill ${k}`, async () => {
          const s = (await c.replicas())[0]?.shards[0];
          return s?.state === "ready" && s.last_failure?.at === at;
        }, POLL);
      }
    } finally {
      flowing = false;
      await traffic;
    }
    const events = await until("a shard_recovered for each kill", async () => {
      const all = await c.events();
      return all.filter((e) => e.kind === "shard_recovered").length >= KILLS ? all : null;
    }, POLL);
    const failed = events.filter((e) => e.kind === "shard_failed");
    const recovered = events.filter((e) => e.kind === "shard_recovered");
    assertEquals(failed.length, KILLS, JSON.stringify(failed.map((e) => e.message)));
    assertEquals(recovered.length, KILLS);
    for (const e of failed) {
      assertStringIncludes(e.message, "failed: killed by signal 9 (SIGKILL)");
      assertOk(!e.message.includes("/proc"), e.message);
    }
    for (const e of recovered) {
      assertEquals(e.subject, "replica/k9-r0");
      assertStringIncludes(e.message, "is ready again");
      assertStringIncludes(e.message, "after it failed: killed by signal 9 (SIGKILL)");
    }
    // Each failure is followed by its recovery, in order.
    const order = events.filter((e) => e.kind === "shard_failed" || e.kind === "shard_recovered")
      .map((e) => e.kind);
    assertEquals(
      order,
      Array.from({ length: KILLS }, () => ["shard_failed", "shard_recovered"]).flat(),
    );
    assertEquals(events.filter((e) => e.kind === "port_held" || e.kind === "shard_notice"), []);
  });
});
