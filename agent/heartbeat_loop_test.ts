/**
 * The heartbeat loop against a scripted control plane (design §10): what a
 * heartbeat carries, GPUs sent once, a newer generation waking the poll,
 * metrics tokens kept, failures counted and a refused token handed back.
 * Each script ends by stopping the loop, so `run()` returning ends a test.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { readFixture } from "../tests/fixtures.ts";
import type { Gpu, Inventory } from "../discovery/types.ts";
import type { HeartbeatRequest } from "../protocol/agent_protocol.ts";
import { ControlError, type HeartbeatResult } from "./control_client.ts";
import { HeartbeatLoop } from "./heartbeat_loop.ts";
import { createLogger, type Logger, type LogLevel } from "../log/log.ts";
import { HeartbeatRequestSchema } from "../protocol/agent_protocol.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { ModelCacheReporter, type ModelCacheReporterOptions } from "./model_cache_report.ts";

const GPUS = (JSON.parse(
  readFixture("machines/dgx_h100_8x_nics/expected_inventory.json"),
) as Inventory).gpus;

interface Line {
  level: LogLevel;
  msg: string;
  fields: Record<string, unknown>;
}

/** Runs the loop over `answers` until they are used up. */
async function runBeats(
  answers: (HeartbeatResult | Error)[],
  running: { generation: number; ignoredGeneration: number | null },
  modelCache?: () => Pick<ModelCacheReporter, "report" | "delivered"> | null,
) {
  const stop = new AbortController();
  const lines: Line[] = [];
  const log: Logger = {
    log: (level, msg, fields = {}) => lines.push({ level, msg, fields }),
    info: (msg, fields) => log.log("info", msg, fields),
    warn: (msg, fields) => log.log("warn", msg, fields),
    error: (msg, fields) => log.log("error", msg, fields),
  };
  const sent: HeartbeatRequest[] = [];
  const refused: (string | null)[] = [];
  const delivered: (Gpu[] | null)[] = [];
  let accepted = 0;
  let wakes = 0;
  // Each answer comes a second after the last: lastHeartbeatAt reads this clock.
  const clock = new FakeClock();
  const started = clock.now();
  const discovery = {
    pendingGpus: GPUS as Gpu[] | null,
    delivered(gpus: Gpu[] | null) {
      delivered.push(gpus);
      if (discovery.pendingGpus === gpus) discovery.pendingGpus = null;
    },
  };
  const loop = new HeartbeatLoop({
    client: {
      nodeToken: "node-token-1",
      heartbeat: (req) => {
        sent.push(req);
        const a = answers.shift();
        if (a === undefined) {
          stop.abort();
          return Promise.reject(new ControlError("aborted", "the agent is stopping"));
        }
        clock.advance(1_000);
        return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
      },
      renewCertificate: () => Promise.reject(new Error("no TLS here")),
    },
    session: {
      ensureRegistered: () => Promise.resolve(true),
      refused: (token) => {
        refused.push(token);
        return Promise.resolve();
      },
      accepted: () => accepted++,
      registeredId: "node-a",
      intervalMs: 1,
    },
    discovery,
    desired: { ...running, wake: () => wakes++ },
    shards: () => [],
    modelCache,
    tls: () => null,
    retry: { initialMs: 1, maxMs: 1, factor: 2 },
    log,
    signal: stop.signal,
    clock,
  });
  await loop.run();
  const said = (msg: string) => lines.filter((l) => l.msg === msg);
  const at = (beats: number) => started + beats * 1_000;
  return { loop, sent, refused, delivered, accepted, wakes: () => wakes, said, at };
}

Deno.test("a heartbeat reports the running generation, sends pending GPUs once, and wakes the poll for another generation", async () => {
  const r = await runBeats([
    { generation: 7, metricsTokenHashes: ["abc"] },
    { generation: 3, metricsTokenHashes: null },
    { generation: 2, metricsTokenHashes: null },
  ], { generation: 3, ignoredGeneration: 2 });
  assertEquals(r.sent.map((h) => [h.node_id, h.generation, h.gpus?.length ?? null]), [
    ["node-a", 3, GPUS.length],
    ["node-a", 3, null],
    ["node-a", 3, null],
    ["node-a", 3, null],
  ]);
  assertEquals(r.delivered, [GPUS, null, null]);
  // 7 differs from the running 3; 3 is running; 2 is being ignored (fencing).
  assertEquals(r.wakes(), 1);
  assertEquals(r.loop.metricsTokenHashes, ["abc"]);
  assertEquals(r.accepted, 3);
  assertEquals(r.loop.lastHeartbeatAt, r.at(3));
});

Deno.test("failed heartbeats are counted and logged, and an answer resets them", async () => {
  const r = await runBeats([
    new ControlError("network", "connection refused"),
    new ControlError("timeout", "no answer"),
    { generation: null, metricsTokenHashes: null },
  ], { generation: 0, ignoredGeneration: null });
  assertEquals(
    r.said("heartbeat failed").map((l) => [l.fields.failures, l.fields.kind]),
    [[1, "network"], [2, "timeout"]],
  );
  assertEquals(r.said("control plane reachable again").map((l) => l.fields), [
    { after_failures: 2 },
  ]);
  assertEquals(r.loop.failures, 0);
  assertEquals(r.wakes(), 0);
});

Deno.test("a refused node token goes back to the session and is no failure", async () => {
  const r = await runBeats([
    new ControlError("http", "refused", { status: 403, code: "forbidden" }),
    { generation: 0, metricsTokenHashes: null },
  ], { generation: 0, ignoredGeneration: null });
  assertEquals(r.refused, ["node-token-1"]);
  assertEquals(r.said("heartbeat failed").length, 0);
  assertEquals(r.loop.failures, 0);
  // The time of the answer, not of the refusal before it.
  assertEquals(r.loop.lastHeartbeatAt, r.at(2));
});

Deno.test("a heartbeat carries the model cache report; an eviction is sent until a heartbeat is answered", async () => {
  const commit = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432";
  const cache = {
    revisions: () =>
      Promise.resolve([{
        repo: "acme/tiny-llm",
        commit,
        blobs: new Map([["k", 4096]]),
        refs: [],
        lastUsedMs: 5,
      }]),
    progress: () => [],
    eviction: { evict: () => Promise.resolve([]), room: () => Promise.resolve(1_000_000) },
  } as unknown as ModelCacheReporterOptions["cache"];
  const reporter = new ModelCacheReporter({
    cache,
    finished: () => Promise.resolve(true),
    watermarks: { highPercent: 90, lowPercent: 80 },
    desired: () => null,
    clock: new FakeClock(),
    log: createLogger("agent", () => {}),
  });
  reporter.cacheEvent({
    kind: "evicted",
    repo: "acme/old",
    commit,
    bytes: 77,
    reason: "disk over the high watermark of 90%",
  });
  const r = await runBeats(
    [new ControlError("network", "connection refused"), {
      generation: 0,
      metricsTokenHashes: null,
    }],
    { generation: 0, ignoredGeneration: null },
    () => reporter,
  );
  assertEquals(r.sent.length, 3);
  for (const req of r.sent) assertOk(HeartbeatRequestSchema.safeParse(req).success);
  const [failed, answered, after] = r.sent.map((s) => s.model_cache!);
  assertEquals(failed.room_bytes, 1_000_000);
  assertEquals(failed.revisions.map((x) => [x.repo, x.state, x.bytes]), [[
    "acme/tiny-llm",
    "complete",
    4096,
  ]]);
  assertEquals(failed.evicted.map((e) => e.repo), ["acme/old"]);
  assertEquals(answered.evicted.map((e) => e.repo), ["acme/old"], "not answered: sent again");
  assertEquals(after.evicted, [], "answered: not sent again");
});

Deno.test("without a model cache a heartbeat has no model_cache (as an older agent's)", async () => {
  const r = await runBeats([{ generation: 0, metricsTokenHashes: null }], {
    generation: 0,
    ignoredGeneration: null,
  });
  assertEquals(r.sent.every((s) => !("model_cache" in s)), true);
});
