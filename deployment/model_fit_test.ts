import fc from "fast-check";
import { assertEquals } from "../tests/assert.ts";
import { deployment, gpus, node, profile } from "../tests/cluster_builders.ts";
import { fixtureFacts } from "../tests/model_configs.ts";
import { placeReplica } from "../placement/mod.ts";
import { fitsGpu } from "../models/memory_estimate.ts";
import type { ModelFacts } from "../models/model_facts.ts";
import { modelFit, modelIssues } from "./model_fit.ts";

const GIB = 2 ** 30;
const qwen = fixtureFacts("qwen2.5-7b-instruct", [15e9]);
const llama405 = fixtureFacts("llama-3.1-405b-instruct");

Deno.test("modelIssues: a TP that does not divide the heads is an error naming the profile", () => {
  const d = deployment([profile({ name: "tp8" }), profile({ name: "tp4", gpus_per_node: 4 })]);
  assertEquals(modelIssues(d, qwen), {
    errors: [{
      path: ["profiles", 0, "tensor_parallel"],
      message: 'profile "tp8": Total number of attention heads (28) must be divisible by ' +
        "tensor parallel size (8): the engine refuses to start (tensor_parallel 1, 2, 4, 7, 14, " +
        "28 would divide them)",
    }],
    warnings: [],
  });
});

Deno.test("modelIssues: too little memory everywhere is an error; on one profile of several, a warning", () => {
  // 405B bf16 at TP 8 on one H100 node: 94.5 GiB of weights per GPU alone.
  const h100 = profile({ name: "h100-tp8" });
  const wide = profile({
    name: "h100-2x8",
    tensor_parallel: 8,
    pipeline_parallel: 2,
    nodes: 2,
    gpus_per_node: 8,
  });
  const only = modelIssues(deployment([h100]), llama405);
  assertEquals(only.warnings, []);
  assertEquals(only.errors.length, 1);
  assertEquals(only.errors[0].path, ["profiles", 0, "gpu_class"]);
  assertEquals(
    only.errors[0].message,
    'profile "h100-tp8": insufficient_gpu_memory: needs 102.4 GiB per GPU (weights 94.5 + ' +
      "KV cache for one 131072-token sequence 7.9) but an h100-80g GPU offers 72.0 GiB " +
      "(80.0 GiB × 0.90) for llama-3.1-405b-instruct, so this profile can never be placed: " +
      "use a larger tensor_parallel or pipeline_parallel, a GPU class with more memory, a " +
      "quantized model, or a shorter context (--max-model-len / --context-length in engine_args)",
  );
  // With a profile that fits (47.2 + 3.9 GiB over two nodes), the first is a warning.
  const both = modelIssues(deployment([h100, wide]), llama405);
  assertEquals([both.errors.length, both.warnings.length], [0, 1]);
  // The cluster's own GPUs count when it reports them: a 141 GiB H200 "h100-80g" would hold it.
  assertEquals(modelIssues(deployment([h100]), llama405, () => 141 * GIB).errors, []);
});

Deno.test("modelIssues: unknown facts or an unknown engine refuse nothing", () => {
  assertEquals(modelIssues(deployment([profile({ name: "tp8" })]), null), {
    errors: [],
    warnings: [],
  });
  const plugin = profile({ name: "tp8", engine: "trtllm" });
  assertEquals(modelIssues(deployment([plugin]), qwen), { errors: [], warnings: [] });
});

const factsArb: fc.Arbitrary<ModelFacts> = fc.record({
  heads: fc.constantFrom(8, 12, 16, 28, 32, 40, 64),
  kv: fc.constantFrom(1, 2, 4, 8),
  layers: fc.integer({ min: 1, max: 128 }),
  context: fc.integer({ min: 1024, max: 262_144 }),
  weights: fc.integer({ min: 1e9, max: 1.6e12 }),
}).map((r) => ({
  source: "prop",
  weight_bytes: r.weights,
  dtype: "bfloat16",
  layers: r.layers,
  hidden_size: r.heads * 128,
  attention_heads: r.heads,
  kv_heads: Math.min(r.kv, r.heads),
  head_dim: 128,
  context_length: r.context,
  quantization: null,
  mla_latent_dim: null,
}));

Deno.test("property: placement refuses a node for memory or heads exactly when the estimate says so", () => {
  fc.assert(
    fc.property(
      factsArb,
      fc.constantFrom(1, 2, 4, 8),
      fc.constantFrom("l40s-45g", "h100-80g", "a100-80g"),
      fc.option(fc.integer({ min: 8 * 1024, max: 200 * 1024 }), { nil: null }),
      (facts, tp, cls, mib) => {
        const p = profile({ name: "p", gpu_class: cls, tensor_parallel: tp, gpus_per_node: tp });
        const list = gpus(8, { cls }).map((g) => ({ ...g, memory_total_mb: mib }));
        const r = placeReplica([node("n1", { gpus: list })], deployment([p]), "r", {
          model: facts,
        });
        const fit = modelFit(facts, p)!;
        const bytes = mib === null ? Number(cls.split("-")[1].slice(0, -1)) * GIB : mib * 2 ** 20;
        const expected = fit.tensorParallelProblem === null &&
          fitsGpu(fit.estimate, bytes, fit.settings.fraction);
        return (r.status === "placed") === expected;
      },
    ),
    { numRuns: 400 },
  );
});
