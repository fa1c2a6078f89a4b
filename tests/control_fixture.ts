/**
 * A control plane for unit tests: memory store, fake clock, no sockets, no
 * loop (passes run when the test calls `reconcile`).
 *
 * @module
 */
import { ControlPlane, type ControlPlaneOptions } from "../control/control_plane.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import type { ShardReport } from "../protocol/agent_protocol.ts";
import { PORT_BLOCK, reportedRendezvous, withPorts } from "../engines/port_block.ts";
import { FakeClock } from "./fake_clock.ts";
import { registration } from "./registration.ts";
import { shardReport } from "./shard_report.ts";

export { shardReport };

/** A control plane on a memory store and a fake clock. */
export async function testControl(
  options: Partial<ControlPlaneOptions> = {},
): Promise<{ cp: ControlPlane; clock: FakeClock; store: MemoryStore }> {
  const clock = options.clock instanceof FakeClock ? options.clock : new FakeClock();
  const store = options.store instanceof MemoryStore ? options.store : new MemoryStore();
  const cp = await ControlPlane.open({ reconcileMs: 3_600_000, ...options, store, clock });
  return { cp, clock, store };
}

/** Registers nodes of a recorded machine; returns their credentials by id. */
export async function registerNodes(
  cp: ControlPlane,
  ids: readonly string[],
  machine = "rtx4090_8x_server",
): Promise<Map<string, string>> {
  const tokens = new Map<string, string>();
  for (const id of ids) {
    tokens.set(id, (await cp.nodes.register(registration(id, machine), null)).node_token);
  }
  return tokens;
}

/**
 * Reports every shard of node `node`'s desired state in `state` through a
 * heartbeat, each on the ports an agent would have allocated: blocks of 10
 * from `firstPort`, in shard order, a leader's rendezvous last in its block.
 */
export async function reportAll(
  cp: ControlPlane,
  node: string,
  state: ShardReport["state"],
  extra: Partial<ShardReport> = {},
  firstPort = 20_000,
): Promise<void> {
  const desired = await cp.desired.wait(node, -1, 0);
  await cp.nodes.heartbeat({
    node_id: node,
    generation: desired.generation,
    shards: desired.shards.map((s, i) => {
      const launch = withPorts(s.launch, firstPort + PORT_BLOCK * i);
      return shardReport(s.id, state, {
        port: launch.port,
        rendezvous_port: reportedRendezvous(launch),
        ...extra,
      });
    }),
  });
}

/** A small deployment every control test can place: TP2 on the recorded RTX 4090 server. */
export const QWEN = {
  name: "qwen",
  model: "Qwen/Qwen2.5-7B-Instruct",
  replicas: 1,
  profiles: [{ name: "tp2", engine: "vllm", gpu_class: "rtx4090-24g", tensor_parallel: 2 }],
};

/** What a promise rejects with, or null when it resolves. */
export async function thrown(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  return null;
}
