import { assertEquals } from "../tests/assert.ts";
import { desiredLaunch, shardLaunch } from "../tests/shard_launch.ts";
import type { ShardSpec } from "../engines/types.ts";
import { initialShard, type ShardMachineState } from "./shard_machine.ts";
import { type RunView, shardMetrics, shardStatus } from "./shard_status.ts";
import { compilePhasePatterns, newReceipt } from "./cold_start_receipt.ts";
import { VLLM_COLD_START_PHASES } from "../engines/cold_start_patterns.ts";

const T0 = 1_700_000_000_000;
const SPEC: ShardSpec = {
  problems: [],
  command: { argv: ["vllm", "serve"], env: {} },
  probes: { serves_http: true, liveness: [], readiness: [], loading_progress: [] },
  metrics: null,
};
const RUN: RunView = {
  download: null,
  desired: { id: "r0.1/0", engine: "vllm", launch: desiredLaunch("r0.1/0") },
  hash: "h",
  pid: null,
  launch: null,
  spec: null,
  notice: null,
  crashLoopLimit: 5,
  coldStart: null,
};

Deno.test("shardStatus: a shard not started yet has no port, no pid, no crash loop", () => {
  const s = shardStatus(initialShard(T0), RUN);
  assertEquals(
    [s.state, s.since, s.pid, s.port, s.rendezvous_port, s.serves_http, s.crash_loop],
    ["pending", T0, null, 0, null, false, null],
  );
});

Deno.test("shardStatus: the rendezvous is reported by a multi-node leader only", () => {
  const world = {
    nodes: 2,
    leader_addr: "10.0.0.1",
    rendezvous_port: 20009,
    leader_http_port: 20000,
  };
  const leader = shardLaunch("r0.1/0", 20000, { world });
  const rank1 = shardLaunch("r0.1/1", 20000, { rank: 1, world });
  const s = shardStatus(initialShard(T0), { ...RUN, launch: leader, spec: SPEC, pid: 42 });
  assertEquals([s.port, s.rendezvous_port, s.serves_http, s.pid], [20000, 20009, true, 42]);
  assertEquals(shardStatus(initialShard(T0), { ...RUN, launch: rank1 }).rendezvous_port, null);
  assertEquals(
    shardStatus(initialShard(T0), { ...RUN, launch: shardLaunch("one", 20000) }).rendezvous_port,
    null,
  );
});

Deno.test("shardStatus: failures in a row show as a crash loop against the limit", () => {
  const m: ShardMachineState = { ...initialShard(T0), state: "backoff", failures: 2, restarts: 2 };
  const s = shardStatus(m, RUN);
  assertEquals([s.crash_loop, s.restarts], [{ failures: 2, limit: 5 }, 2]);
});

Deno.test("shardStatus and shardMetrics hand out copies", () => {
  const m: ShardMachineState = {
    ...initialShard(T0),
    progress: { percent: 10, done: null, total: null },
    restartsTotal: 3,
    lastReadyAfterMs: 900,
    lastFailure: {
      at: T0,
      reason: "exited with code 1",
      exit_code: 1,
      signal: null,
      log_tail: ["a"],
      permanent: false,
    },
  };
  const notice = { at: T0, message: "port 20000 is held by pid 7" };
  const coldStart = newReceipt(T0, compilePhasePatterns(VLLM_COLD_START_PHASES));
  const s = shardStatus(m, { ...RUN, notice, coldStart });
  assertEquals(s.cold_start, coldStart);
  s.cold_start!.phases[0].warm = true;
  assertEquals(coldStart.phases[0].warm, false);
  s.last_failure!.log_tail.push("b");
  s.progress!.percent = 99;
  s.notice!.message = "changed";
  assertEquals(m.lastFailure?.log_tail, ["a"]);
  assertEquals(m.progress?.percent, 10);
  assertEquals(notice.message, "port 20000 is held by pid 7");
  assertEquals(shardMetrics(m, RUN.desired), {
    id: "r0.1/0",
    gpu_indices: [0],
    restarts_total: 3,
    last_ready_after_ms: 900,
  });
});
