/**
 * The supervisor with real processes (design §9): process groups, stop
 * semantics, adoption after an agent restart, and bounded logs. Timeouts,
 * backoff and the crash loop are the state machine's, tested with a fake
 * clock in supervisor/shard_machine_test.ts and shard_runner_test.ts.
 * Engines here are small shell programs; the vLLM and
 * SGLang behaviours are tested with the fake engine in
 * tests/supervisor_engines_test.ts. Every process a test starts is killed in
 * a `finally`, by process group.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { until } from "./until.ts";
import { ENGINE_API_VERSION, type EngineProbes, type ShardLaunch } from "../engines/types.ts";
import type { ShardSpec } from "../engines/types.ts";
import {
  type DesiredShard,
  groupMembers,
  isRunning,
  readPidFile,
  readProcStat,
  type ShardReport,
  type ShardState,
  Supervisor,
  type SupervisorEvent,
  type SupervisorOptions,
  writePidFile,
} from "../supervisor/mod.ts";

/** Process groups started by a test, killed at the end whatever happened. */
class Cleanup {
  readonly groups = new Set<number>();
  watch(statuses: ShardReport[]): void {
    for (const s of statuses) if (s.pid !== null) this.groups.add(s.pid);
  }
  kill(): void {
    for (const g of this.groups) {
      try {
        Deno.kill(-g, "SIGKILL");
      } catch {
        // Gone.
      }
    }
  }
}

function launch(id: string, port = 0, nodes = 1): ShardLaunch {
  return {
    api_version: ENGINE_API_VERSION,
    deployment: "test",
    replica_id: id,
    shard_id: id,
    model: "m",
    served_model_name: "m",
    profile: {
      name: "p",
      tensor_parallel: nodes,
      pipeline_parallel: 1,
      nodes,
      gpus_per_node: 1,
      quantization: "none",
      engine_args: [],
      engine_options: {},
      env: {},
    },
    rank: 0,
    world: { nodes, leader_addr: "127.0.0.1", rendezvous_port: 0, leader_http_port: port },
    gpus: [{ index: 0, class: "l40s-45g", compute_capability: "8.9" }],
    fabric: null,
    node: { id: "n1", mgmt_addr: "127.0.0.1", mgmt_interface: "lo" },
    port,
    engine_version: null,
  };
}

const NO_HTTP: EngineProbes = {
  serves_http: false,
  liveness: [],
  readiness: [],
  loading_progress: [],
};
const PROGRESS = [{ regex: "loading (?<percent>\\d+)%" }];

/** A test engine: a shell script, as `sh -c`. */
function shellEngine(script: string, probes: EngineProbes = NO_HTTP) {
  return (_d: DesiredShard): Promise<ShardSpec> =>
    Promise.resolve({
      problems: [],
      command: { argv: ["sh", "-c", script], env: {} },
      probes,
      metrics: null,
    });
}

async function withSupervisor(
  prepare: (d: DesiredShard) => Promise<ShardSpec>,
  options: Partial<SupervisorOptions>,
  fn: (
    sup: Supervisor,
    ctx: { stateDir: string; events: SupervisorEvent[]; cleanup: Cleanup },
  ) => Promise<void>,
): Promise<void> {
  const stateDir = options.stateDir ?? await Deno.makeTempDir({ prefix: "llmgw_supervisor_test_" });
  const events: SupervisorEvent[] = [];
  const cleanup = new Cleanup();
  const sup = new Supervisor({
    tickMs: 50,
    probeTimeoutMs: 300,
    stopGraceMs: 1_000,
    settleMs: 300,
    backoff: { initialMs: 100, maxMs: 400, factor: 2 },
    ...options,
    stateDir,
    onEvent: (e) => events.push(e),
  }, prepare);
  try {
    await sup.start();
    await fn(sup, { stateDir, events, cleanup });
  } finally {
    cleanup.watch(sup.status());
    await sup.shutdown().catch(() => {});
    cleanup.kill();
    if (options.stateDir === undefined) await Deno.remove(stateDir, { recursive: true });
  }
}

/** Polls until `pred` holds for the shard's status (10 s at most), watching every group seen. */
function shardReaches(
  sup: Supervisor,
  id: string,
  pred: (s: ShardReport) => boolean,
  cleanup: Cleanup,
  what: string,
): Promise<ShardReport> {
  return until(`shard ${id} to reach: ${what}`, () => {
    cleanup.watch(sup.status());
    const s = sup.shard(id)?.status;
    return s !== undefined && pred(s) ? s : null;
  }, {
    timeoutMs: 10_000,
    intervalMs: 25,
    describe: () => `now ${JSON.stringify(sup.shard(id)?.status)}`,
  });
}

const inState = (...states: ShardState[]) => (s: ShardReport) => states.includes(s.state);

Deno.test("stop leaves no process of the shard's group, workers included", async () => {
  // The "engine" forks two workers that would outlive a signal to the leader alone.
  const engine = shellEngine("sleep 300 & sleep 300 & echo loading 50%; exec sleep 300", {
    ...NO_HTTP,
    loading_progress: PROGRESS,
  });
  await withSupervisor(engine, {}, async (sup, { cleanup }) => {
    await sup.reconcile([{ id: "s1", engine: "test", launch: launch("s1") }]);
    const ready = await shardReaches(sup, "s1", inState("ready"), cleanup, "ready");
    const pid = ready.pid!;
    assertEquals(readProcStat(pid)?.pgid, pid, "the shard leads its own process group");
    assertEquals(readProcStat(pid)?.sid, pid, "in its own session");
    assertEquals(groupMembers(pid).length, 3);
    assertEquals(ready.progress, { percent: 50, done: null, total: null });
    await sup.reconcile([]);
    assertEquals(groupMembers(pid), [], "no member of the group is left");
    assertOk(!isRunning(pid));
    assertEquals(sup.status(), []);
  });
});

Deno.test("a group that ignores SIGTERM is killed after the grace period", async () => {
  const engine = shellEngine("trap '' TERM; sleep 300 & echo up; while :; do sleep 1; done");
  await withSupervisor(engine, { stopGraceMs: 300 }, async (sup, { cleanup, events }) => {
    await sup.reconcile([{ id: "stubborn", engine: "test", launch: launch("stubborn") }]);
    const { pid } = await shardReaches(sup, "stubborn", inState("ready"), cleanup, "ready");
    await sup.reconcile([]);
    assertEquals(groupMembers(pid!), []);
    assertOk(events.some((e) => e.kind === "state" && e.message.startsWith("stopping → exited")));
  });
});

Deno.test("the log tail stays within its bounds under a flood, and the file rotates", async () => {
  const engine = shellEngine(
    'i=0; while [ $i -lt 20000 ]; do echo "flood line $i"; i=$((i+1)); done; sleep 0.5; echo flood done; exec sleep 300',
  );
  await withSupervisor(engine, {
    tailLimits: { maxLines: 100, maxBytes: 4096 },
    logMaxBytes: 64 * 1024,
    logKeep: 2,
  }, async (sup, { cleanup, stateDir }) => {
    await sup.reconcile([{ id: "loud", engine: "test", launch: launch("loud") }]);
    await shardReaches(sup, "loud", inState("ready"), cleanup, "ready");
    await until(
      "the flood to finish in the log tail",
      () => sup.shard("loud")!.log_tail.includes("flood done"),
      { timeoutMs: 10_000 },
    );
    const tail = sup.shard("loud")!.log_tail;
    assertOk(tail.length <= 100, `${tail.length} lines`);
    assertOk(tail.join("").length <= 4096);
    assertEquals(tail.at(-1), "flood done");
    assertOk(tail.at(-2)!.startsWith("flood line 19"), tail.at(-2));
    const log = join(stateDir, "shards", "loud", "engine.log");
    assertOk(Deno.statSync(`${log}.1`).size > 0, "the log was rotated");
  });
});

Deno.test("reconcile leaves matching shards alone and replaces changed ones", async () => {
  await withSupervisor(shellEngine("exec sleep 300"), {}, async (sup, { cleanup }) => {
    const a = { id: "a", engine: "test", launch: launch("a") };
    const b = { id: "b", engine: "test", launch: launch("b") };
    await sup.reconcile([a, b]);
    const pidA = (await shardReaches(sup, "a", inState("ready"), cleanup, "a ready")).pid;
    const pidB = (await shardReaches(sup, "b", inState("ready"), cleanup, "b ready")).pid;
    const changedB = { ...b, launch: { ...b.launch, port: 9 } };
    await sup.reconcile([a, changedB]);
    assertEquals(sup.shard("a")!.status.pid, pidA, "a untouched");
    const newB = await shardReaches(
      sup,
      "b",
      (s) => s.pid !== null && s.pid !== pidB,
      cleanup,
      "b replaced",
    );
    assertOk(!isRunning(pidB!));
    assertEquals(newB.port, 9);
  });
});

Deno.test("a restarted supervisor adopts running shards and refuses a reused pid", async () => {
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_supervisor_test_" });
  const engine = shellEngine("sleep 300 & exec sleep 301");
  const cleanup = new Cleanup();
  const impostor = new Deno.Command("sleep", {
    args: ["302"],
    detached: true,
    stdout: "null",
    stderr: "null",
  })
    .spawn();
  cleanup.groups.add(impostor.pid);
  try {
    const shards = ["x", "y", "z"].map((id) => ({ id, engine: "test", launch: launch(id) }));
    const first = new Supervisor(
      { stateDir, tickMs: 50, settleMs: 200, onEvent: () => {} },
      engine,
    );
    await first.start();
    await first.reconcile(shards);
    const before = new Map<string, number>();
    for (const s of shards) {
      before.set(s.id, (await shardReaches(first, s.id, inState("ready"), cleanup, "ready")).pid!);
    }
    await first.detach(); // the agent goes away; its engines keep running
    for (const pid of before.values()) assertOk(isRunning(pid), "engines survive the agent");

    // Shard z's process dies while no agent watches, and its pid "is reused"
    // by an unrelated process: its pid file now names the impostor's pid with
    // z's old fingerprint.
    const zFile = join(stateDir, "shards", "z", "pid.json");
    const zRecord = (readPidFile(zFile) as { record: Parameters<typeof writePidFile>[1] }).record;
    Deno.kill(-before.get("z")!, "SIGKILL");
    writePidFile(zFile, { ...zRecord, pid: impostor.pid, pgid: impostor.pid });

    const events: SupervisorEvent[] = [];
    const second = new Supervisor(
      { stateDir, tickMs: 50, settleMs: 200, onEvent: (e) => events.push(e) },
      engine,
    );
    try {
      await second.start();
      const adopted = second.status();
      assertEquals(adopted.map((s) => [s.id, s.pid, s.adopted]), [
        ["x", before.get("x"), true],
        ["y", before.get("y"), true],
      ]);
      const refusal = events.find((e) => e.kind === "adoption_refused");
      assertEquals(refusal?.shard, "z");
      assertStringIncludes(refusal!.message, `pid ${impostor.pid} now belongs to another process`);
      assertOk(isRunning(impostor.pid), "the unrelated process is left alone");
      // Adopted shards keep running: same pids, no restart; reconcile with the
      // same desired state leaves them alone and starts z afresh.
      await second.reconcile(shards);
      for (const id of ["x", "y"]) {
        const s = await shardReaches(second, id, inState("ready"), cleanup, "adopted ready");
        assertEquals(s.pid, before.get(id));
      }
      const z = await shardReaches(second, "z", inState("ready"), cleanup, "z restarted");
      assertOk(z.pid !== before.get("z") && z.pid !== impostor.pid);
      // Stopping an adopted shard stops its whole group, too.
      await second.reconcile(shards.slice(1));
      assertEquals(groupMembers(before.get("x")!), []);
    } finally {
      cleanup.watch(second.status());
      await second.shutdown();
    }
  } finally {
    cleanup.kill();
    await impostor.status;
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test("an adopted shard that serves no HTTP is ready at the new supervisor's first tick", async () => {
  // A rank above 0 of a multi-node replica: its readiness is its leader's.
  // Waiting out the settle time again after an agent restart would take the
  // whole replica out of the endpoints meanwhile (issue #23 item 4).
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_supervisor_test_" });
  const engine = shellEngine("exec sleep 303");
  const cleanup = new Cleanup();
  const first = new Supervisor({ stateDir, tickMs: 50, settleMs: 200, onEvent: () => {} }, engine);
  let second: Supervisor | null = null;
  try {
    await first.start();
    await first.reconcile([{ id: "w1", engine: "test", launch: launch("w1") }]);
    const pid = (await shardReaches(first, "w1", inState("ready"), cleanup, "ready")).pid;
    await first.detach();
    // No tick of its own and a settle time of a minute: only adoption can make it ready.
    second = new Supervisor(
      { stateDir, tickMs: 60_000, settleMs: 60_000, onEvent: () => {} },
      engine,
    );
    await second.start();
    await second.tick();
    assertEquals(
      second.status().map((s) => [s.id, s.pid, s.adopted, s.state]),
      [["w1", pid, true, "ready"]],
    );
  } finally {
    cleanup.watch(first.status());
    if (second !== null) {
      cleanup.watch(second.status());
      await second.shutdown();
    }
    cleanup.kill();
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test("shard directories that cannot be narrowed are warned about; the agent starts and the shard runs", async () => {
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_supervisor_test_" });
  try {
    // An older agent's 0755 directories, on a file system (or owner) that refuses chmod.
    const root = join(stateDir, "shards");
    Deno.mkdirSync(join(root, "s"), { recursive: true });
    for (const dir of [root, join(root, "s")]) Deno.chmodSync(dir, 0o755);
    Deno.writeTextFileSync(join(root, "s", "pid.json.tmp"), "{}\n");
    const chmod = () => {
      // Tests run as root, where a real EPERM is hard to get.
      throw new Deno.errors.PermissionDenied("Operation not permitted (os error 1)");
    };
    await withSupervisor(shellEngine("exec sleep 300"), { stateDir, chmod }, async (sup, ctx) => {
      const warned = () => ctx.events.filter((e) => e.kind === "file_mode");
      assertEquals(warned().map((e) => e.shard), [null, "s"]);
      assertStringIncludes(warned()[0].message, `${root} is 0755 and cannot be narrowed to 0700`);
      assertEquals([...Deno.readDirSync(join(root, "s"))].map((e) => e.name), []);
      await sup.reconcile([{ id: "s", engine: "test", launch: launch("s") }]);
      await shardReaches(sup, "s", inState("ready"), ctx.cleanup, "ready despite the mode");
      // The start said so too, and went on.
      assertEquals(warned().map((e) => e.shard), [null, "s", "s"]);
      assertEquals(Deno.statSync(join(root, "s")).mode! & 0o777, 0o755);
    });
  } finally {
    await Deno.remove(stateDir, { recursive: true });
  }
});
