/** Table and property tests for the node × GPU × TP × PP arithmetic (design §6.2). */
import fc from "fast-check";
import { assertEquals } from "../tests/assert.ts";
import {
  nodesToFit,
  parallelismProblems,
  type ParallelShape,
  tooBigAdvice,
} from "./parallelism.ts";

const shape = (nodes: number, g: number, tp: number, pp = 1): ParallelShape => ({
  nodes,
  gpus_per_node: g,
  tensor_parallel: tp,
  pipeline_parallel: pp,
});

const CASES: { name: string; shape: ParallelShape; problems: string[] }[] = [
  { name: "TP 8 on one node of 8", shape: shape(1, 8, 8), problems: [] },
  { name: "TP 16 spanning 2 nodes of 8", shape: shape(2, 8, 16), problems: [] },
  { name: "TP 8 × PP 2 over 2 nodes", shape: shape(2, 8, 8, 2), problems: [] },
  { name: "TP 3 × PP 2 on 6 GPUs", shape: shape(1, 6, 3, 2), problems: [] },
  {
    name: "too few GPUs for TP",
    shape: shape(1, 8, 4),
    problems: [
      "gpus_per_node: nodes × gpus_per_node (1 × 8 = 8) must equal tensor_parallel × pipeline_parallel (4 × 1 = 4)",
    ],
  },
  {
    name: "TP 6 × PP 2 over 3 nodes of 4 splits a TP group across nodes",
    shape: shape(3, 4, 6, 2),
    problems: [
      "tensor_parallel: tensor_parallel 6 must divide the GPUs of a node (4) or span whole nodes (a multiple of 4)",
    ],
  },
  {
    name: "both wrong",
    shape: shape(2, 4, 3),
    problems: [
      "gpus_per_node: nodes × gpus_per_node (2 × 4 = 8) must equal tensor_parallel × pipeline_parallel (3 × 1 = 3)",
      "tensor_parallel: tensor_parallel 3 must divide the GPUs of a node (4) or span whole nodes (a multiple of 4)",
    ],
  },
  {
    name: "zero and fractional values are named, not computed with",
    shape: shape(0, 8, 1.5),
    problems: [
      "nodes: nodes must be a positive integer, got 0",
      "tensor_parallel: tensor_parallel must be a positive integer, got 1.5",
    ],
  },
];

for (const c of CASES) {
  Deno.test(`parallelismProblems: ${c.name}`, () => {
    assertEquals(parallelismProblems(c.shape).map((p) => `${p.field}: ${p.message}`), c.problems);
  });
}

Deno.test("parallelismProblems: every TP group on one node, or over whole nodes, passes", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 8 }),
      fc.integer({ min: 1, max: 8 }),
      fc.integer({ min: 1, max: 4 }),
      fc.boolean(),
      (a, b, pp, spans) => {
        // Spanning: TP is b whole nodes of a GPUs; inside: a TP groups of b per node.
        const g = spans ? a : a * b;
        const tp = spans ? a * b : b;
        const total = tp * pp;
        if (total % g !== 0) return true;
        return parallelismProblems(shape(total / g, g, tp, pp)).length === 0;
      },
    ),
  );
});

Deno.test("parallelismProblems: a GPU count that is not TP × PP is always refused", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 16 }),
      fc.integer({ min: 1, max: 16 }),
      fc.integer({ min: 1, max: 32 }),
      fc.integer({ min: 1, max: 8 }),
      (nodes, g, tp, pp) => {
        const refused = parallelismProblems(shape(nodes, g, tp, pp)).some((p) =>
          p.field === "gpus_per_node"
        );
        return refused === (nodes * g !== tp * pp);
      },
    ),
  );
});

Deno.test("nodesToFit and tooBigAdvice: the fewest nodes whose shards fit, keeping TP and PP", () => {
  const one = (tp: number, pp = 1) => ({
    nodes: 1,
    gpus_per_node: tp * pp,
    tensor_parallel: tp,
    pipeline_parallel: pp,
  });
  assertEquals(nodesToFit(one(8), 4), 2);
  assertEquals(nodesToFit(one(16), 8), 2);
  assertEquals(nodesToFit(one(8), 3), 4);
  assertEquals(nodesToFit(one(4, 2), 4), 2);
  assertEquals(
    tooBigAdvice(one(8), 4),
    "use nodes: 2 (4 GPUs per node) or a smaller tensor_parallel",
  );
  assertEquals(
    tooBigAdvice(one(2), 1),
    "use nodes: 2 (1 GPU per node) or a smaller tensor_parallel",
  );
  assertEquals(
    tooBigAdvice(one(8), 0),
    "use a smaller tensor_parallel or a GPU class with more GPUs per node",
  );
});

Deno.test("nodesToFit: its answer fits and adds up, and no fewer nodes would (property)", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 64 }),
      fc.integer({ min: 1, max: 8 }),
      fc.integer({ min: 1, max: 16 }),
      (tp, pp, most) => {
        const s = shape(1, tp * pp, tp, pp);
        const ok = (m: number) =>
          (tp * pp) % m === 0 && (tp * pp) / m <= most &&
          parallelismProblems({ ...s, nodes: m, gpus_per_node: (tp * pp) / m }).length === 0;
        const m = nodesToFit(s, most);
        const brute = Array.from({ length: tp * pp }, (_, i) => i + 1).find((k) => k > 1 && ok(k));
        assertEquals(m, brute ?? null);
      },
    ),
    { numRuns: 300 },
  );
});
