/**
 * One index through a reconcile pass: releases undo placements exactly, and
 * `avoid` places as an index without those nodes would.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { alloc, deployment, fabric, gpus, node, profile } from "../tests/cluster_builders.ts";
import type { ClusterNode } from "../inventory/types.ts";
import { applyPlacement, type ClusterIndex, indexCluster, place, releasePlacement } from "./mod.ts";

/** What placement reads of an index, comparable with assertEquals. */
function shape(index: ClusterIndex) {
  return {
    nodes: index.nodes.map((n) => ({
      id: n.node.id,
      classes: [...n.classes].map(([cls, s]) => [cls, s.free, s.allocated, s.unhealthy, s.pos]),
      deployments: [...n.deployments].sort(),
      allocated: [...n.allocatedIndices].sort((a, b) => a - b),
    })),
    free: [...index.freeByClass].map(([cls, a]) => [cls, [...a]]),
  };
}

const cluster = (): ClusterNode[] => [
  node("n1", { allocations: [alloc("other", [0, 1], "dep")] }),
  node("n2", { gpus: gpus(8, { problems: [] }) }),
  node("n3", { gpus: [...gpus(4), ...gpus(4, { first: 4, cls: "a100-80g" })] }),
];

Deno.test("a release undoes the placement it follows, class by class", () => {
  const p = profile({ name: "p", gpus_per_node: 4 });
  const dep = deployment([p]);
  const index = indexCluster(cluster());
  const before = shape(index);
  const placed = place(index, dep, "r-1.1");
  assertOk(placed.status === "placed");
  applyPlacement(index, dep.name, placed.shards);
  assertOk(JSON.stringify(shape(index)) !== JSON.stringify(before));
  releasePlacement(index, dep.name, placed.shards);
  assertEquals(shape(index), before);
});

Deno.test("a released allocation the snapshot held frees its GPUs as a fresh index of the rest would", () => {
  const nodes = cluster();
  const index = indexCluster(nodes);
  releasePlacement(index, "dep", [{ node: "n1", gpu_indices: [0, 1] }]);
  const fresh = indexCluster(nodes.map((n) => ({ ...n, allocations: [] })));
  assertEquals(shape(index), shape(fresh));
});

Deno.test("a released unhealthy GPU counts unhealthy, not free, and explanations say so", () => {
  const sick = node("n1", {
    gpus: gpus(8, { problems: ["xid 79"] }),
    allocations: [alloc("old", [0, 1, 2, 3, 4, 5, 6, 7], "dep")],
  });
  const index = indexCluster([sick]);
  const dep = deployment([profile({ name: "p", gpus_per_node: 1 })]);
  // The stable verdict is memoized on first use: it must not outlive the release.
  assertEquals(place(index, dep, "x", { detail: "grouped" }).status, "unschedulable");
  releasePlacement(index, "dep", [{ node: "n1", gpu_indices: [0, 1, 2, 3, 4, 5, 6, 7] }]);
  assertEquals(shape(index), shape(indexCluster([{ ...sick, allocations: [] }])));
  const after = place(index, dep, "x", { detail: "grouped" });
  const fresh = place(indexCluster([{ ...sick, allocations: [] }]), dep, "x", {
    detail: "grouped",
  });
  assertEquals(after.explanation, fresh.explanation);
});

Deno.test("a release on a node the index lacks is skipped", () => {
  const index = indexCluster(cluster());
  const before = shape(index);
  releasePlacement(index, "dep", [{ node: "gone", gpu_indices: [0] }]);
  assertEquals(shape(index), before);
});

Deno.test("avoid places as an index without those nodes, and leaves the index as it is", () => {
  const ib = [fabric("ib-a", ["mlx5_0"])];
  const nodes = ["n1", "n2", "n3", "n4"].map((id) => node(id, { fabrics: ib }));
  const cases = [
    deployment([profile({ name: "one", gpus_per_node: 8 })]),
    deployment([profile({ name: "two", nodes: 2, gpus_per_node: 8 })]),
    deployment([profile({ name: "three", nodes: 3, gpus_per_node: 8 })]),
  ];
  for (const dep of cases) {
    for (const avoid of [["n1"], ["n1", "n3"], ["n2", "n3", "n4"]]) {
      const index = indexCluster(nodes);
      applyPlacement(index, "dep", [{ node: "n2", gpu_indices: [0], gpu_class: "h100-80g" }]);
      const before = shape(index);
      const got = place(index, dep, "r.2", { detail: "full", avoid: new Set(avoid) });
      const without = indexCluster(nodes.filter((n) => !avoid.includes(n.id)));
      applyPlacement(
        without,
        "dep",
        avoid.includes("n2") ? [] : [{
          node: "n2",
          gpu_indices: [0],
          gpu_class: "h100-80g",
        }],
      );
      assertEquals(
        got,
        place(without, dep, "r.2", { detail: "full" }),
        `${dep.profiles[0].name} ${avoid}`,
      );
      assertEquals(shape(index), before);
    }
  }
});
