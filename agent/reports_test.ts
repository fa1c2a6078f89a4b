/**
 * The wire reports: clipped to the protocol's bounds, so one odd value never
 * invalidates a whole heartbeat; GPUs that stop answering are kept, marked.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { readFixture } from "../tests/fixtures.ts";
import { shardReport as reportOf } from "../tests/shard_report.ts";
import {
  GpuReportSchema,
  RegisterRequestSchema,
  ShardReportSchema,
} from "../protocol/agent_protocol.ts";
import type { Inventory } from "../discovery/types.ts";
import type { ShardReport } from "../supervisor/types.ts";
import {
  gpuReport,
  gpusAfterRediscovery,
  registerRequest,
  registrationFingerprint,
  shardReport,
} from "./reports.ts";

const INVENTORY = JSON.parse(
  readFixture("machines/dgx_h100_8x_nics/expected_inventory.json"),
) as Inventory;

const WHO = {
  nodeId: "n1",
  hostname: "n1.example",
  mgmtAddr: "10.0.0.1",
  mgmtInterface: "eth0",
  agentUrl: "http://10.0.0.1:9180",
  labels: { zone: "a" },
  agentVersion: "0.1.0",
};

Deno.test("reports: a recorded DGX registers within the protocol's schema", () => {
  const req = registerRequest(WHO, INVENTORY, { vllm: "0.11.1" });
  const parsed = RegisterRequestSchema.safeParse(req);
  assertOk(parsed.success, JSON.stringify(parsed.error?.issues));
  assertEquals(req.gpus.length, 8);
  assertEquals(req.fabrics.map((f) => f.fabric), ["ib-compute"]);
  for (const g of INVENTORY.gpus) assertOk(GpuReportSchema.safeParse(gpuReport(g)).success);
});

Deno.test("reports: a shard status with odd values still makes a valid report", () => {
  const odd: ShardReport = {
    id: "s",
    engine: "x",
    state: "failed",
    since: NaN,
    pid: null,
    port: undefined as unknown as number, // a launch without a port
    rendezvous_port: 70_000,
    notice: null,
    serves_http: false,
    progress: { percent: Infinity, done: 1, total: 2 },
    restarts: 0,
    adopted: false,
    last_failure: {
      at: 1,
      reason: "r".repeat(10_000),
      exit_code: null,
      signal: "SIG".repeat(20),
      log_tail: Array.from({ length: 500 }, () => "x".repeat(9_000)),
      permanent: false,
      kind: "k".repeat(500),
    },
    spec_hash: "h",
  };
  const r = shardReport(odd);
  const parsed = ShardReportSchema.safeParse(r);
  assertOk(parsed.success, JSON.stringify(parsed.error?.issues));
  assertEquals([r.port, r.since, r.progress?.percent], [0, 0, null]);
  assertEquals(r.last_failure?.log_tail.length, 200);
  assertEquals(r.last_failure?.kind?.length, 64);
});

Deno.test("reports: a receipt's download sources are cut to the wire's bounds", () => {
  const status = reportOf("s", "starting", {
    cold_start: {
      spawned_at: 1,
      download: {
        seconds: 1,
        bytes: 40,
        // A mirror's endpoint longer than a report allows, and more sources than one carries.
        sources: [
          { kind: "hub", name: `https://mirror.lan/${"p".repeat(400)}`, bytes: 20 },
          ...Array.from({ length: 20 }, (_, i) => ({
            kind: "peer" as const,
            name: `peer n${i}`,
            bytes: 1,
          })),
        ],
      },
      phases: [],
    },
  });
  const r = shardReport(status);
  const parsed = ShardReportSchema.safeParse(r);
  assertOk(parsed.success, JSON.stringify(parsed.error?.issues));
  const sources = r.cold_start?.download?.sources ?? [];
  assertEquals(sources.length, 16);
  assertEquals([sources[0].name.length, sources[0].bytes], [256, 20]);
  // A receipt without sources (an older agent's shape) passes as it is.
  const plain = { ...status.cold_start!, download: { seconds: 1, bytes: 40 } };
  assertEquals(shardReport({ ...status, cold_start: plain }).cold_start, plain);
});

Deno.test("reports: GPUs that stop answering stay, marked unhealthy", () => {
  const good = INVENTORY.gpus.slice(0, 2);
  const failed: Inventory = {
    ...INVENTORY,
    gpus: [],
    source: "nvidia-smi-failed",
    problems: ["nvidia-smi: timed out"],
  };
  const kept = gpusAfterRediscovery(good, failed);
  assertEquals(kept.map((g) => g.index), [0, 1]);
  assertOk(kept.every((g) => g.health.problems.at(-1)!.includes("nvidia-smi: timed out")));
  assertEquals(good[0].health.problems.length, INVENTORY.gpus[0].health.problems.length);
  assertEquals(gpusAfterRediscovery(good, INVENTORY), INVENTORY.gpus);
  assertEquals(gpusAfterRediscovery([], failed), []);
});

Deno.test("reports: the registration fingerprint ignores what heartbeats carry", () => {
  const req = registerRequest(WHO, INVENTORY, {});
  const busier = registerRequest(WHO, {
    ...INVENTORY,
    gpus: INVENTORY.gpus.map((g) => ({
      ...g,
      memory_used_mb: 1234,
      health: { ...g.health, temperature_c: 90 },
    })),
  }, {});
  assertEquals(registrationFingerprint(busier), registrationFingerprint(req));
  const relabelled = registerRequest({ ...WHO, labels: { zone: "b" } }, INVENTORY, {});
  assertOk(registrationFingerprint(relabelled) !== registrationFingerprint(req));
  const upgraded = registerRequest(WHO, INVENTORY, { vllm: "0.12.0" });
  assertOk(registrationFingerprint(upgraded) !== registrationFingerprint(req));
});

Deno.test("reports: a crash loop's count travels; odd counts are dropped; older agents omit it", () => {
  const base: ShardReport = {
    id: "s",
    engine: "sglang",
    state: "backoff",
    since: 1,
    pid: null,
    port: 0,
    rendezvous_port: null,
    notice: null,
    serves_http: true,
    progress: null,
    restarts: 2,
    adopted: false,
    last_failure: null,
    spec_hash: "h",
  };
  const looping = shardReport({ ...base, crash_loop: { failures: 3, limit: 5 } });
  assertEquals(looping.crash_loop, { failures: 3, limit: 5 });
  assertOk(ShardReportSchema.safeParse(looping).success);
  assertEquals(shardReport({ ...base, crash_loop: { failures: 0, limit: NaN } }).crash_loop, null);
  assertEquals(shardReport(base).crash_loop, null);
  // An agent from before crash loops sends no such field: still a valid report.
  const { crash_loop: _, ...old } = looping;
  assertOk(ShardReportSchema.safeParse(old).success);
});

Deno.test("reports: a heartbeat leaves the engine out; a report without one (older agents) parses", () => {
  const status = reportOf("s", "ready", { engine: "vllm" });
  const wire = shardReport(status);
  assertEquals("engine" in wire, false);
  assertOk(ShardReportSchema.safeParse(wire).success);
  // The local API's status names it, within the wire's bounds.
  assertEquals(ShardReportSchema.parse({ ...wire, engine: "vllm" }).engine, "vllm");
  assertOk(!ShardReportSchema.safeParse({ ...wire, engine: "x".repeat(65) }).success);
});
