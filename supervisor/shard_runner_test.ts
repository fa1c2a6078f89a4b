/**
 * The runner driven tick by tick, without the supervisor's timer: the
 * order of its checks when an engine dies (issue #23 item 8) and its crash
 * loop (item 1). Every process a test starts is killed by its group in a
 * `finally`.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { until } from "../tests/until.ts";
import { desiredLaunch } from "../tests/shard_launch.ts";
import type { ShardSpec } from "../engines/types.ts";
import type { EngineProbes } from "../engines/types.ts";
import { groupMembers } from "./proc.ts";
import { ShardRunner } from "./shard_runner.ts";
import { resolveOptions } from "./supervisor.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import type { SupervisorEvent, SupervisorOptions } from "./types.ts";
import { VLLM_COLD_START_PHASES } from "../engines/cold_start_patterns.ts";
import type { ColdStartReceipt } from "../protocol/cold_start_receipt.ts";

const HTTP: EngineProbes = {
  serves_http: true,
  liveness: [],
  readiness: [{ path: "/health", expect_status: 200 }],
  loading_progress: [],
};

/** `/proc/net/tcp` listing one LISTEN socket on 127.0.0.1:`port` whose inode no process holds. */
function orphanListener(port: number): string {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  return "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  " +
    "timeout inode\n" +
    `   0: 0100007F:${hex} 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000 ` +
    "       0 987654 1 0000000000000000 100 0 0 10 0\n";
}

async function withRunner(
  argv: string[],
  options: Partial<SupervisorOptions>,
  port: number | null,
  fn: (runner: ShardRunner, events: SupervisorEvent[]) => Promise<void>,
  probes: EngineProbes = HTTP,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_runner_test_" });
  const events: SupervisorEvent[] = [];
  const spec: ShardSpec = {
    problems: [],
    command: { argv, env: {} },
    probes,
    metrics: null,
  };
  const runner = new ShardRunner(
    { id: "s", engine: "test", launch: desiredLaunch("s", { port }) },
    "hash",
    { dir: join(dir, "s"), pidFile: join(dir, "s", "pid.json"), log: join(dir, "s", "engine.log") },
    resolveOptions({
      stateDir: dir,
      stopGraceMs: 1_000,
      backoff: { initialMs: 1, maxMs: 1, factor: 1 },
      ...options,
    }),
    () => Promise.resolve(spec),
    (e) => events.push({ ...e, at: Date.now() }),
  );
  const groups = new Set<number>();
  try {
    await fn(runner, events);
  } finally {
    if (runner.pid !== null) groups.add(runner.pid);
    for (const g of groups) {
      try {
        Deno.kill(-g, "SIGKILL");
      } catch {
        // Gone.
      }
    }
    await runner.stop().catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("kill -9 of an engine is reported by its signal, not blamed on a socket /proc cannot place", async () => {
  // /proc as a dying engine leaves it for a moment: its socket still listed, held by nobody.
  const proc = await Deno.makeTempDir({ prefix: "llmgw_fake_proc_" });
  const port = 29_871;
  await Deno.mkdir(join(proc, "net"));
  await Deno.writeTextFile(join(proc, "net", "tcp"), orphanListener(port));
  try {
    await withRunner(["sleep", "30"], { procRoot: proc }, port, async (runner, events) => {
      await runner.start();
      const pid = runner.pid!;
      assertEquals(runner.status().state, "starting");
      Deno.kill(pid, "SIGKILL");
      // At once, before the runtime has delivered the exit status.
      await runner.tick();
      const s = runner.status();
      assertEquals(s.state, "backoff");
      assertEquals(s.last_failure?.reason, "killed by signal 9 (SIGKILL)");
      assertEquals(s.last_failure?.signal, "SIGKILL");
      assertEquals(events.filter((e) => e.kind === "port_held"), []);
      assertEquals(groupMembers(pid), []);
    });
  } finally {
    await Deno.remove(proc, { recursive: true });
  }
});

Deno.test("an engine that keeps exiting gives up after the crash-loop limit: failed, permanent, counted", async () => {
  const limit = 3;
  await withRunner(
    ["sh", "-c", "echo \"ModuleNotFoundError: No module named 'sglang'\"; exit 1"],
    { crashLoopLimit: limit },
    null,
    async (runner, events) => {
      await runner.start();
      const seen: string[] = [];
      // Bounded: each round is a start, an exit and a 1 ms backoff.
      for (let i = 0; i < 200 && runner.status().state !== "failed"; i++) {
        await new Promise((r) => setTimeout(r, 10));
        await runner.tick();
        const s = runner.status();
        if (seen.at(-1) !== s.state) seen.push(s.state);
      }
      const s = runner.status();
      assertEquals(s.state, "failed", `states: ${seen.join(", ")}`);
      assertEquals(s.crash_loop, { failures: limit, limit });
      assertEquals(s.restarts, limit - 1);
      assertEquals(s.last_failure?.permanent, true);
      assertStringIncludes(
        s.last_failure!.reason,
        `crash loop: failed ${limit} times in a row without staying ready`,
      );
      assertStringIncludes(s.last_failure!.reason, "last: exited with code 1");
      assertEquals(s.last_failure?.exit_code, 1);
      assertStringIncludes(s.last_failure!.log_tail.join("\n"), "No module named 'sglang'");
      const states = events.filter((e) => e.kind === "state").map((e) => e.message);
      assertOk(
        states.some((m) => m.includes(`crash loop (2 of ${limit} failures in a row)`)),
        states.join("\n"),
      );
      // Not started again: it stays failed.
      await runner.tick();
      assertEquals(runner.status().state, "failed");
      assertEquals(runner.pid, null);
    },
  );
});

Deno.test("on the supervisor's clock: a silent start, then a load that never finishes, end with the log tail", async () => {
  // No real waiting: the timeouts are minutes long and the clock is moved past them.
  const clock = new FakeClock();
  // The first run says nothing; the second (the marker there) loads and stalls.
  const marker = await Deno.makeTempFile({ prefix: "llmgw_runner_marker_" });
  await Deno.remove(marker);
  const script = `if [ -e '${marker}' ]; then echo 'loading 10%'; echo 'loading 20%'; fi; ` +
    `touch '${marker}'; exec sleep 300`;
  const progress: EngineProbes = {
    ...HTTP,
    loading_progress: [{ regex: "loading (?<percent>\\d+)%" }],
  };
  await withRunner(
    ["sh", "-c", script],
    {
      clock,
      startTimeoutMs: 60_000,
      loadTimeoutMs: 600_000,
      backoff: { initialMs: 5_000, maxMs: 5_000, factor: 1 },
    },
    1,
    async (runner, events) => {
      // First run: no sign of life when the start timeout passes.
      await runner.start();
      await until("the first run to be up", () => {
        try {
          return Deno.statSync(marker).isFile;
        } catch {
          return false;
        }
      }, { timeoutMs: 10_000 });
      clock.advance(60_001);
      await runner.tick();
      let s = runner.status();
      assertEquals(s.state, "backoff");
      assertStringIncludes(s.last_failure!.reason, "showed no sign of life within 60000 ms");
      assertEquals(runner.pid, null);
      // Not before the backoff is over, then a second run that loads and stalls.
      clock.advance(4_999);
      await runner.tick();
      assertEquals(runner.status().state, "backoff");
      clock.advance(1);
      await runner.tick();
      const pid = runner.pid!;
      await until("the engine's loading lines", async () => {
        await runner.tick();
        return runner.status().progress?.percent === 20;
      }, { timeoutMs: 10_000 });
      assertEquals(runner.status().state, "loading");
      clock.advance(600_001);
      await runner.tick();
      s = runner.status();
      assertEquals(s.state, "backoff");
      assertStringIncludes(
        s.last_failure!.reason,
        "did not become ready within 600000 ms of loading",
      );
      assertEquals(s.last_failure!.log_tail, ["loading 10%", "loading 20%"]);
      assertEquals(groupMembers(pid), []);
      assertEquals(s.restarts, 2);
      assertOk(
        events.some((e) => e.kind === "state" && e.message.startsWith("starting → loading")),
      );
    },
    progress,
  ).finally(() => Deno.remove(marker).catch(() => {}));
});

Deno.test("on the supervisor's clock: the engine's phase lines and its first ready make the run's receipt", async () => {
  const clock = new FakeClock();
  const marker = await Deno.makeTempFile({ prefix: "llmgw_runner_marker_" });
  await Deno.remove(marker);
  // vLLM's own lines (engine reference §9); --enforce-eager style: no compile, no graphs.
  const script = "echo '(EngineCore_DP0 pid=1) INFO 01-23 15:48:47 [gpu_model_runner.py:2602] " +
    "Starting to load model m...'; " +
    `i=0; while [ ! -e '${marker}' ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done; ` +
    "echo '(EngineCore_DP0 pid=1) INFO 01-23 15:49:08 [gpu_model_runner.py:2653] " +
    "Model loading took 3.8844 GiB and 20.442057 seconds'; " +
    "echo '(EngineCore_DP0 pid=1) INFO 01-23 15:50:06 [kv_cache_utils.py:1087] " +
    "GPU KV cache size: 840,160 tokens'; exec sleep 300";
  const probes: EngineProbes = {
    serves_http: false,
    liveness: [],
    readiness: [],
    loading_progress: [],
    cold_start_phases: [...VLLM_COLD_START_PHASES],
  };
  const told: [string, string, ColdStartReceipt][] = [];
  await withRunner(
    ["sh", "-c", script],
    { clock, settleMs: 30_000, onColdStart: (s, e, r) => told.push([s, e, r]) },
    null,
    async (runner) => {
      const t0 = clock.now();
      await runner.start();
      assertEquals(runner.status().cold_start?.spawned_at, t0);
      clock.advance(1_000);
      await until("the weights' start line", async () => {
        await runner.tick();
        return runner.status().cold_start?.phases[0].start_ms === 1_000;
      }, { timeoutMs: 10_000 });
      clock.advance(20_000);
      await Deno.writeTextFile(marker, "");
      await until("the KV cache line", async () => {
        await runner.tick();
        return runner.status().cold_start?.phases.find((p) => p.phase === "kv_cache")?.end_ms ===
          21_000;
      }, { timeoutMs: 10_000 });
      assertEquals(told, []);
      // No HTTP to probe: ready once it has run the settle time.
      clock.advance(9_001);
      await runner.tick();
      assertEquals(runner.status().state, "ready");
      const receipt = runner.status().cold_start!;
      const at = (name: string) => receipt.phases.find((p) => p.phase === name);
      assertEquals(at("weights"), {
        phase: "weights",
        start_ms: 1_000,
        end_ms: 21_000,
        engine_seconds: 20.442057,
        warm: false,
        skipped: false,
      });
      assertEquals([at("compile")?.skipped, at("graph_capture")?.skipped], [true, true]);
      assertEquals([at("ready")?.start_ms, at("ready")?.end_ms], [21_000, 30_001]);
      // Told once, with the engine's name.
      await runner.tick();
      assertEquals(told, [["s", "test", receipt]]);
    },
    probes,
  ).finally(() => Deno.remove(marker).catch(() => {}));
});
