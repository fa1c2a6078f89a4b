/**
 * What one gateway poll costs the control plane (design §12, §16): the ready
 * endpoints of a cluster of N synthetic 8-GPU nodes holding as many
 * two-GPU replicas of one deployment as its largest GPU class allows. Every
 * gateway asks for this list every second or two, so it must stay cheap as
 * the cluster grows.
 *
 * Run: `deno run -A bench/endpoints_poll.ts [NODES...]` (default 1000 10000).
 */
import { MemoryStore } from "../control/store/memory_store.ts";
import { ControlPlane } from "../control/control_plane.ts";
import { registrationOf, syntheticCluster } from "./synthetic_cluster.ts";

async function run(count: number): Promise<void> {
  const cp = await ControlPlane.open({ store: new MemoryStore(), reconcileMs: 3_600_000 });
  const nodes = syntheticCluster(count);
  for (const n of nodes) {
    await cp.nodes.register(registrationOf(n), null);
  }
  const classes = new Map<string, number>();
  for (const n of nodes) {
    for (const g of n.gpus) {
      if (g.class !== null) classes.set(g.class, (classes.get(g.class) ?? 0) + 1);
    }
  }
  const [cls, gpus] = [...classes].sort((a, b) => b[1] - a[1])[0];
  await cp.deployments.apply({
    name: "d",
    model: "org/d",
    replicas: Math.min(10_000, Math.floor(gpus / 2)), // the schema allows 10,000 at most
    profiles: [{ name: "p", engine: "vllm", gpu_class: cls, tensor_parallel: 2 }],
  });
  await cp.reconcile();
  const placed = cp.replicas().filter((r) => r.state !== "pending").length;
  const median = (fn: () => void) => {
    const times: number[] = [];
    for (let i = 0; i < 21; i++) {
      const t = performance.now();
      fn();
      times.push(performance.now() - t);
    }
    return times.sort((a, b) => a - b)[10];
  };
  // The same per-replica work as readyEndpoints, whatever the shards reported.
  const poll = median(() => cp.replicas());
  // Side by side: reading each shard's node without and with the deep copy
  // the poll used to make (getNode) per shard.
  const shardNodes = cp.replicas().flatMap((r) => r.shards.map((s) => s.node));
  const peek = median(() => shardNodes.forEach((id) => cp.inventory.peekNode(id)));
  const copy = median(() => shardNodes.forEach((id) => cp.inventory.getNode(id)));
  console.log(
    `| ${count.toLocaleString("en")} | ${placed.toLocaleString("en")} | ${poll.toFixed(1)} ms | ` +
      `${peek.toFixed(1)} ms | ${copy.toFixed(1)} ms | ${(copy / peek).toFixed(1)}× |`,
  );
  cp.stop();
}

console.log(
  "| nodes | placed replicas | poll (median of 21) | shard nodes read, no copy | " +
    "the same with getNode's deep copy | copy / no copy |",
);
console.log("| --- | --- | --- | --- | --- | --- |");
for (const n of (Deno.args.length > 0 ? Deno.args : ["1000", "10000"]).map(Number)) await run(n);
