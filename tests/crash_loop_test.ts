/**
 * Crash loops end (issue #23 item 1): an engine that its node reports but
 * that exits at once (a broken install) is shown crash-looping with its
 * count and last error, then its replica moves to a node where it runs, or
 * fails with the reason where no other node fits. Real agents and fake
 * engines on loopback; every engine group is killed by the fixture, on
 * failure too.
 */
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { until } from "./until.ts";
import { portBlock, portsOf } from "./port_plan.ts";
import {
  oneShardDeployment,
  POLL,
  untilNodes,
  untilShardReady,
  withPortCluster,
} from "./port_ownership_fixtures.ts";

/** Restarts come fast, so five failures take seconds, not the default's 15 s and more. */
const BACKOFF = { initialMs: 300, maxMs: 2_000, factor: 2 };
/** Slower, so a second node surely joins before the agent gives up (7.5 s of backoff). */
const SLOWER = { initialMs: 500, maxMs: 4_000, factor: 2 };
/** The engine on the broken node dies as soon as it starts, exit 1 with a CUDA error. */
const BROKEN = { FAKE_ENGINE_CRASH_AFTER_SECONDS: "0" };
/** This file's ports (tests/port_plan.ts): one block per agent. */
const PORTS = portsOf(import.meta.url);

Deno.test("an engine that exits at once on its node crash-loops visibly, then its replica moves to a node where it runs", async () => {
  await withPortCluster(async (c) => {
    await c.startAgent({
      id: "broken",
      ports: portBlock(PORTS, 0),
      env: BROKEN,
      backoff: SLOWER,
    });
    await untilNodes(c, 1);
    assertEquals(
      (await c.admin("POST", "/v1/deployments", oneShardDeployment("loop"))).status,
      201,
    );
    // Shown crash-looping, with its count and last error, while the agent still restarts it.
    const looping = await until("the shard shown crash-looping", async () => {
      const [r] = await c.replicas();
      const s = r?.shards[0];
      return s?.crash_loop !== null && s?.crash_loop !== undefined ? s : null;
    }, POLL);
    assertOk(looping.crash_loop!.failures >= 2, JSON.stringify(looping.crash_loop));
    assertEquals(looping.crash_loop!.limit, 5);
    assertOk(looping.restarts >= 1, `restarts ${looping.restarts}`);
    assertStringIncludes(looping.last_failure!.reason, "exited with code 1");
    // A node where the engine runs joins before the agent gives up.
    const good = await c.startAgent({ id: "good", ports: portBlock(PORTS, 1) });
    await untilNodes(c, 2);
    const ready = await untilShardReady(good.agent, "loop");
    c.groups.add(ready.pid!);
    const events = await until("the replica ready on the good node", async () => {
      const [r] = await c.replicas();
      if (r?.state !== "ready" || r.shards[0].node !== "good") return null;
      return await c.events();
    }, POLL);
    const rebuilding = events.find((e) => e.kind === "replica_rebuilding");
    assertOk(rebuilding !== undefined, JSON.stringify(events.map((e) => e.kind)));
    assertStringIncludes(rebuilding.message, "placing it on another node than broken");
    const failed = events.filter((e) => e.kind === "shard_failed");
    assertOk(failed.length >= 2, `${failed.length} shard_failed events`);
    assertStringIncludes(failed.at(-1)!.message, "in a row; the agent gives up on this node at 5");
    assertOk(!events.some((e) => e.kind === "replica_failed"));
  });
});

Deno.test("a crash loop where no other node fits fails the replica with the reason: not pending, not bouncing", async () => {
  await withPortCluster(async (c) => {
    await c.startAgent({
      id: "only",
      ports: portBlock(PORTS, 2),
      env: BROKEN,
      backoff: BACKOFF,
    });
    await untilNodes(c, 1);
    assertEquals(
      (await c.admin("POST", "/v1/deployments", oneShardDeployment("lone"))).status,
      201,
    );
    const failed = await until("the replica failed", async () => {
      const [r] = await c.replicas();
      return r?.state === "failed" && r.shards.length === 0 ? r : null;
    }, { ...POLL, timeoutMs: 60_000 });
    assertStringIncludes(failed.failure!.reason, "crash loop: failed 5 times in a row");
    assertStringIncludes(failed.failure!.log_tail.join("\n"), "CUDA error");
    const events = await c.events();
    const gaveUp = events.filter((e) => e.kind === "replica_failed");
    assertEquals(gaveUp.length, 1);
    assertStringIncludes(gaveUp[0].message, "no node other than only fits");
    assertEquals(events.filter((e) => e.kind === "replica_placed").length, 1, "placed once");
  });
});
