/**
 * Placement cost against cluster size (design §16: milliseconds, not seconds,
 * at 10,000 nodes; linear or better). Places one replica, with the full
 * summary explanation, repeatedly on clusters of 100, 1,000 and 10,000 nodes
 * × 8 GPUs, interleaving sizes so machine noise hits all of them alike, and
 * prints the median per placement and its growth.
 *
 * Run: `deno run -A bench/placement_scale.ts` (writes nothing; copy the table
 * into docs/benchmarks.md).
 */
import { applyPlacement, indexCluster, place } from "../placement/mod.ts";
import { multiNode, singleNode, syntheticCluster } from "./synthetic_cluster.ts";

const SIZES = [100, 1_000, 10_000];
const ROUNDS = 30;
const PER_ROUND = 20;

const indexes = new Map(SIZES.map((n) => [n, indexCluster(syntheticCluster(n))]));
const cases = [
  { name: "single-node, 2 profiles, fp8", deployment: singleNode, detail: false as const },
  { name: "multi-node 2x8 on one fabric", deployment: multiNode, detail: false as const },
  { name: "single-node, with per-node detail", deployment: singleNode, detail: "full" as const },
];
const samples = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const c of cases) {
    for (const n of SIZES) {
      const index = indexes.get(n)!;
      const t0 = performance.now();
      for (let i = 0; i < PER_ROUND; i++) place(index, c.deployment, "r-0", { detail: c.detail });
      const per = (performance.now() - t0) / PER_ROUND;
      const key = `${c.name}|${n}`;
      if (round > 2) (samples.get(key) ?? samples.set(key, []).get(key)!).push(per);
    }
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log("| case | 100 nodes | 1,000 nodes | 10,000 nodes | 10,000 ÷ 1,000 |");
console.log("| --- | --- | --- | --- | --- |");
for (const c of cases) {
  const m = SIZES.map((n) => median(samples.get(`${c.name}|${n}`)!));
  const fmt = (ms: number) => ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`;
  console.log(`| ${c.name} | ${m.map(fmt).join(" | ")} | ${(m[2] / m[1]).toFixed(1)}× |`);
}
const r = place(indexes.get(10_000)!, singleNode, "r-0");
console.log(`\nexample (10,000 nodes): ${r.status}: ${r.explanation.summary}`);

// Throughput: 1,000 replicas placed one after another on a fresh 10,000-node
// index, each placement recorded before the next (what a reconciler does).
const fresh = indexCluster(syntheticCluster(10_000));
const t0 = performance.now();
let placed = 0;
for (let i = 0; i < 1_000; i++) {
  const res = place(fresh, singleNode, `r-${i}`);
  if (res.status === "placed") {
    applyPlacement(fresh, singleNode.name, res.shards);
    placed++;
  }
}
const seconds = (performance.now() - t0) / 1000;
console.log(
  `sequence: ${placed} of 1,000 replicas placed on 10,000 nodes in ${seconds.toFixed(2)} s: ${
    (1_000 / seconds).toFixed(0)
  } placements/s on one core`,
);
