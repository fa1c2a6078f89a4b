/**
 * Cold-start receipts end to end on one host (issue #25 item 7): the
 * supervisor runs the vLLM plugin's command with the agent's prepare step
 * (agent/prepare_shard.ts, its compile cache directory under the state
 * directory) against the fake engine, reads the engine's phase lines into
 * the shard's receipt, and a second start of the same shard finds the
 * compile cache its first start wrote: compile warm, graphs captured again.
 * Every engine group is killed in a `finally`.
 */
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { until } from "./until.ts";
import { launch } from "./fake_engine_harness.ts";
import { EngineRegistry } from "../engines/registry.ts";
import { prepareShard } from "../agent/prepare_shard.ts";
import { testEngineCache } from "./engine_cache.ts";
import type { ColdStartReceipt } from "../protocol/cold_start_receipt.ts";
import { PortAllocator, type ShardReport, Supervisor } from "../supervisor/mod.ts";
import { portsOf } from "./port_plan.ts";

const SHIMS = fileURLToPath(new URL("../dev/fake_engine/bin", import.meta.url));

function phase(r: ColdStartReceipt, name: string) {
  const p = r.phases.find((x) => x.phase === name);
  assertOk(p !== undefined, `${name} in ${JSON.stringify(r)}`);
  return p;
}

Deno.test("a restart on the same host loads its compiled graphs: the receipt says compile was warm", async () => {
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_cold_start_test_" });
  const told: ColdStartReceipt[] = [];
  const groups = new Set<number>();
  // The supervisor's shards keep their directories, as in the agent (agent/agent_supervisor.ts).
  const cache = testEngineCache(`${stateDir}/engine_cache`, () => sup.shards());
  const sup = new Supervisor({
    stateDir,
    tickMs: 50,
    probeTimeoutMs: 500,
    stopGraceMs: 3_000,
    env: {
      PATH: `${SHIMS}:${Deno.env.get("PATH")}`,
      FAKE_ENGINE_ACCESS_LOG: "0",
      FAKE_ENGINE_LOAD_SECONDS: "1",
    },
    // This file's own ports: test files run in parallel (tests/port_plan.ts).
    ports: new PortAllocator(portsOf(import.meta.url)),
    onEvent: () => {},
    onColdStart: (_shard, engine, receipt) => {
      assertEquals(engine, "vllm");
      told.push(receipt);
    },
  }, prepareShard(EngineRegistry.builtin(), { engineCache: cache }));
  const ready = (): Promise<ShardReport> =>
    until("the shard to be ready with its receipt settled", () => {
      const s = sup.shard("r-1/0")?.status;
      if (s?.pid) groups.add(s.pid);
      return s?.state === "ready" && s.cold_start?.phases.at(-1)?.end_ms != null ? s : null;
    }, { timeoutMs: 30_000, intervalMs: 20 });
  // As the control plane sends it: the ports are the agent's to allocate.
  const l = launch({ port: 1 });
  const desired = {
    ...l,
    port: null,
    world: { ...l.world, rendezvous_port: null, leader_http_port: null },
  };
  const shard = () => ({ id: l.shard_id, engine: "vllm", launch: desired });
  try {
    await sup.start();
    await sup.reconcile([shard()]);
    const cold = (await ready()).cold_start!;
    assertEquals(sup.shards().map((s) => s.id), ["r-1/0"], "a running shard is in use");
    assertEquals(phase(cold, "compile").warm, false);
    assertOk(phase(cold, "compile").engine_seconds !== null);
    for (const name of ["weights", "compile", "kv_cache", "graph_capture", "ready"]) {
      const p = phase(cold, name);
      assertOk(p.start_ms !== null && p.end_ms !== null && !p.skipped, JSON.stringify(p));
    }
    assertStringIncludes(
      sup.shard("r-1/0")!.log_tail.join("\n"),
      `Using cache directory: ${stateDir}/engine_cache/vllm/org--fake-model-8b_h100-80g_tp1-pp1-n1_v0.11.1_`,
    );

    // Stopped, then started again on this host: the same key, the same directory.
    await sup.reconcile([]);
    assertEquals(sup.shards(), [], "a stopped shard is not");
    await sup.reconcile([shard()]);
    const warm = (await ready()).cold_start!;
    assertOk(warm.spawned_at > cold.spawned_at);
    assertEquals(phase(warm, "compile").warm, true);
    assertEquals([phase(warm, "graph_capture").warm, phase(warm, "graph_capture").skipped], [
      false,
      false,
    ]);
    assertStringIncludes(
      sup.shard("r-1/0")!.log_tail.join("\n"),
      "Directly load the compiled graph(s) for dynamic shape from the cache",
    );
    assertEquals(told.map((r) => phase(r, "compile").warm), [false, true]);
  } finally {
    for (const s of sup.status()) if (s.pid !== null) groups.add(s.pid);
    await sup.shutdown().catch(() => {});
    await cache.close();
    for (const g of groups) {
      try {
        Deno.kill(-g, "SIGKILL");
      } catch {
        // Gone.
      }
    }
    await Deno.remove(stateDir, { recursive: true });
  }
});
