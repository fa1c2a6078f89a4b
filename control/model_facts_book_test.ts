import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, registerNodes, testControl, thrown } from "../tests/control_fixture.ts";
import { fixtureFacts } from "../tests/model_configs.ts";
import type { ModelFacts } from "../models/model_facts.ts";
import type { ModelFactsSource } from "../models/facts_source.ts";
import { InvalidInputError } from "./errors.ts";
import { liveExplanation } from "./live_explanation.ts";
import { RETRY_FAILED_MS } from "./model_facts_book.ts";

const LLAMA_405B = "meta-llama/Llama-3.1-405B-Instruct";

/** A source that knows the fixtures by hub id, and counts its reads. */
function fixtures(): ModelFactsSource & { reads: number } {
  const known: Record<string, ModelFacts> = {
    [QWEN.model]: fixtureFacts("qwen2.5-7b-instruct", [15_231_233_024]),
    [LLAMA_405B]: fixtureFacts("llama-3.1-405b-instruct"),
  };
  return {
    reads: 0,
    facts(model) {
      this.reads++;
      return Promise.resolve(known[model] ?? null);
    },
  };
}

Deno.test("apply refuses a tensor_parallel that does not divide the model's heads, and stores nothing", async () => {
  const { cp, store } = await testControl({ modelFacts: fixtures() });
  await registerNodes(cp, ["n1"]);
  const e = await thrown(cp.deployments.apply({
    ...QWEN,
    profiles: [{ ...QWEN.profiles[0], name: "tp8", tensor_parallel: 8 }],
  }));
  assertOk(e instanceof InvalidInputError, String(e));
  assertEquals(e.path, "profiles[0].tensor_parallel");
  assertStringIncludes(
    e.message,
    'profile "tp8": Total number of attention heads (28) must be divisible by tensor parallel size (8)',
  );
  assertEquals(await store.listDeployments(), []);
  // TP 4 divides 28: accepted.
  const ok = await cp.deployments.apply({
    ...QWEN,
    profiles: [{ ...QWEN.profiles[0], name: "tp4", tensor_parallel: 4 }],
  });
  assertEquals(ok.warnings, []);
});

Deno.test("apply refuses a model no profile's GPUs can hold, with the numbers", async () => {
  const { cp, store } = await testControl({ modelFacts: fixtures() });
  await registerNodes(cp, ["n1"]); // 8 × RTX 4090 (24 GiB)
  const spec = {
    name: "llama",
    model: LLAMA_405B,
    profiles: [{ name: "tp8", engine: "vllm", gpu_class: "rtx4090-24g", tensor_parallel: 8 }],
  };
  const e = await thrown(cp.deployments.apply(spec));
  assertOk(e instanceof InvalidInputError, String(e));
  assertEquals(e.path, "profiles[0].gpu_class");
  // 811,706,777,600 B ÷ 8 = 94.5 GiB of weights per GPU; the 4090s report 24,564 MiB.
  assertStringIncludes(
    e.message,
    'profile "tp8": insufficient_gpu_memory: needs 102.4 GiB per GPU (weights 94.5 + KV cache ' +
      "for one 131072-token sequence 7.9) but an rtx4090-24g GPU offers 21.6 GiB (24.0 GiB × 0.90)",
  );
  assertEquals(await store.listDeployments(), []);
  // Beside a profile that can hold it (its class is absent today), it is a warning,
  // and placement says why the first profile is passed over.
  const both = await cp.deployments.apply({
    ...spec,
    profiles: [...spec.profiles, {
      name: "h200-2x8",
      engine: "vllm",
      gpu_class: "h200-140g",
      tensor_parallel: 8,
      pipeline_parallel: 2,
      nodes: 2,
    }],
  });
  assertOk(both.warnings.some((w) => w.message.includes("insufficient_gpu_memory")));
  // Scaling it says so again, as an apply of the scaled spec would.
  const scaled = await cp.deployments.scale("llama", 2);
  assertOk(scaled.some((w) => w.message.includes('profile "tp8": insufficient_gpu_memory')));
  await cp.reconcile();
  const [replica] = cp.replicas();
  // Pending: profile 1 refused for memory, profile 2's class absent.
  assertEquals(replica.explanation!.profiles[0].counts, { insufficient_gpu_memory: 1 });
  const live = liveExplanation(cp.state, replica.id).live!;
  assertEquals(live.profiles[0].counts, { insufficient_gpu_memory: 1 });
});

Deno.test("facts that cannot be read are a warning, and placement refuses nothing for them", async () => {
  const failing: ModelFactsSource = {
    facts: () => Promise.reject(new Error("Cannot read model facts: no /models/x/config.json")),
  };
  const { cp } = await testControl({ modelFacts: failing });
  await registerNodes(cp, ["n1"]);
  const r = await cp.deployments.apply({
    ...QWEN,
    profiles: [{ ...QWEN.profiles[0], tensor_parallel: 8 }],
  });
  assertEquals(r.warnings.map((w) => w.message), [
    "the model's memory and tensor_parallel were not checked: " +
    "Cannot read model facts: no /models/x/config.json",
  ]);
  await cp.reconcile();
  assertEquals(cp.replicas()[0].profile, "tp2");
});

Deno.test("opening a store learns the stored deployments' facts before anything is placed", async () => {
  const source = fixtures();
  const first = await testControl({ modelFacts: source });
  await registerNodes(first.cp, ["n1"]);
  await first.cp.deployments.apply({
    ...QWEN,
    profiles: [{ ...QWEN.profiles[0], name: "tp4", tensor_parallel: 4 }],
  });
  const again = await testControl({ modelFacts: source, store: first.store });
  await again.cp.state.modelFacts.settled();
  assertEquals(again.cp.state.modelFacts.known(QWEN.model)?.attention_heads, 28);
  assertEquals(source.reads, 2);
  // Known facts are not read again at the next apply.
  await again.cp.deployments.apply({
    ...QWEN,
    profiles: [{ ...QWEN.profiles[0], name: "tp4", tensor_parallel: 4 }],
  });
  assertEquals(source.reads, 2);
});

Deno.test("a model whose facts could not be read is not asked again for five minutes", async () => {
  let reads = 0;
  const failing: ModelFactsSource = {
    facts: () => {
      reads++;
      return Promise.reject(new Error("hub unreachable"));
    },
  };
  const { cp, clock } = await testControl({ modelFacts: failing });
  const apply = () => cp.deployments.apply(QWEN);
  const first = await apply();
  assertOk(
    first.warnings.some((w) =>
      w.message === "the model's memory and tensor_parallel were not checked: hub unreachable"
    ),
  );
  await apply();
  assertEquals(reads, 1);
  clock.advance(RETRY_FAILED_MS);
  await apply();
  assertEquals(reads, 2);
});

Deno.test("facts are known by model and revision: a pinned revision is read at that revision", async () => {
  const asked: string[] = [];
  const qwen = fixtureFacts("qwen2.5-7b-instruct", [15_231_233_024]);
  const source: ModelFactsSource = {
    facts(model, revision) {
      asked.push(`${model}@${revision}`);
      return Promise.resolve(revision === "v2" ? qwen : null);
    },
  };
  const { cp } = await testControl({ modelFacts: source });
  await registerNodes(cp, ["n1"]);
  const e = await thrown(cp.deployments.apply({
    ...QWEN,
    revision: "v2",
    profiles: [{ ...QWEN.profiles[0], name: "tp8", tensor_parallel: 8 }],
  }));
  assertOk(e instanceof InvalidInputError, String(e));
  // The default revision (main) is another revision: unknown there, so nothing refused.
  await cp.deployments.apply({ ...QWEN, profiles: [{ ...QWEN.profiles[0], tensor_parallel: 8 }] });
  assertEquals(asked, [`${QWEN.model}@v2`, `${QWEN.model}@main`]);
  assertEquals(cp.state.modelFacts.known(QWEN.model, "v2")?.attention_heads, 28);
  assertEquals(cp.state.modelFacts.known(QWEN.model), null);
});
