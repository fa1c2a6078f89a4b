import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, registerNodes, testControl } from "../tests/control_fixture.ts";
import { registration } from "../tests/registration.ts";
import { ConflictError, InvalidInputError, NotFoundError } from "./errors.ts";

/** The error an apply throws, or null. */
async function refusal(p: Promise<unknown>): Promise<InvalidInputError | ConflictError | null> {
  try {
    await p;
    return null;
  } catch (e) {
    if (e instanceof InvalidInputError || e instanceof ConflictError) return e;
    throw e;
  }
}

Deno.test("apply refuses flags llmgw owns, naming the field, and stores nothing", async () => {
  const { cp, store } = await testControl();
  await registerNodes(cp, ["n1"]);
  const cases: [string, string, string[], string][] = [
    ["vllm", "tp2", ["--tensor-parallel-size", "4"], "--tensor-parallel-size"],
    ["vllm", "tp2", ["--port=9000"], "--port"],
    ["vllm", "tp2", ["--max-model-len", "8192", "--tensor_parallel_size=2"], "--tensor-parallel"],
    ["sglang", "tp2", ["--tp-size", "2"], "--tp-size"],
  ];
  for (const [engine, profile, args, flag] of cases) {
    const e = await refusal(cp.deployments.apply({
      ...QWEN,
      profiles: [{ ...QWEN.profiles[0], name: profile, engine, engine_args: args }],
    }));
    assertOk(e instanceof InvalidInputError, `${engine} ${args.join(" ")} was accepted`);
    assertEquals(e.path, "profiles[0].engine_args", args.join(" "));
    assertStringIncludes(e.message, flag);
  }
  assertEquals(cp.deployments.list(), []);
  assertEquals(await store.listDeployments(), []);
  await cp.reconcile();
  assertEquals(cp.replicas(), []);
  // A valid one is accepted.
  const ok = await cp.deployments.apply({
    ...QWEN,
    profiles: [{ ...QWEN.profiles[0], engine_args: ["--max-model-len", "8192"] }],
  });
  assertEquals(ok.created, true);
  assertEquals((await store.listDeployments()).map((d) => d.name), ["qwen"]);
});

Deno.test("apply refuses the second of two profiles with its own index in the path", async () => {
  const { cp } = await testControl();
  const e = await refusal(cp.deployments.apply({
    ...QWEN,
    profiles: [
      QWEN.profiles[0],
      {
        name: "sg",
        engine: "sglang",
        gpu_class: "rtx4090-24g",
        tensor_parallel: 1,
        engine_args: ["--port", "1"],
      },
    ],
  }));
  assertOk(e instanceof InvalidInputError);
  assertEquals(e.path, "profiles[1].engine_args");
});

Deno.test("apply refuses an fp8 profile whose class is below compute capability 8.9", async () => {
  const { cp } = await testControl();
  const reg = registration("a1");
  // rtx4090 reports no capability in the recording; make the class an old one.
  await cp.nodes.register(
    { ...reg, gpus: reg.gpus.map((g) => ({ ...g, compute_capability: "8.0" })) },
    null,
  );
  for (const q of ["fp8", "modelopt"]) {
    const e = await refusal(cp.deployments.apply({
      ...QWEN,
      profiles: [{ ...QWEN.profiles[0], quantization: q }],
    }));
    assertOk(e instanceof InvalidInputError, `${q} was accepted`);
    assertEquals(e.path, "profiles[0].quantization");
    assertStringIncludes(e.message, "8.9");
  }
  assertEquals(cp.deployments.list(), []);
});

Deno.test("apply: created, then updated; a served model name belongs to one deployment", async () => {
  const { cp } = await testControl();
  assertEquals((await cp.deployments.apply(QWEN)).created, true);
  assertEquals((await cp.deployments.apply({ ...QWEN, replicas: 2 })).created, false);
  const clash = await refusal(cp.deployments.apply({
    ...QWEN,
    name: "other",
    served_model_name: "qwen",
  }));
  assertOk(clash instanceof ConflictError);
  assertEquals(clash.path, "served_model_name");
  assertEquals(cp.deployments.list().map((d) => [d.name, d.spec.replicas]), [["qwen", 2]]);
});

Deno.test("scale and delete name a deployment that does not exist", async () => {
  const { cp } = await testControl();
  for (const op of [() => cp.deployments.scale("nope", 1), () => cp.deployments.delete("nope")]) {
    let found: unknown = null;
    try {
      await op();
    } catch (e) {
      found = e;
    }
    assertOk(found instanceof NotFoundError);
    assertEquals(found.message, "no deployment nope");
  }
});

Deno.test("the dry run runs the same checks and changes nothing", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1"]);
  const e = await refusal(cp.deployments.dryRun({
    ...QWEN,
    profiles: [{ ...QWEN.profiles[0], engine_args: ["--port", "1"] }],
  }));
  assertOk(e instanceof InvalidInputError);
  const plan = await cp.deployments.dryRun({ ...QWEN, replicas: 5 });
  assertEquals(plan.map((r) => r.status), [
    "placed",
    "placed",
    "placed",
    "placed",
    "unschedulable",
  ]);
  assertEquals(cp.inventory.listNodes()[0].allocations, []);
  assertEquals(cp.deployments.list(), []);
});

Deno.test("apply: a change beyond the replica count is a new revision; history is bounded but keeps what replicas run", async () => {
  const { cp, store } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply({ ...QWEN, replicas: 1 });
  await cp.reconcile();
  const created = cp.deployments.get("qwen");
  assertEquals([created.revision, created.rollout, created.history?.length], [1, null, 1]);
  // The count and the rollout settings alone: no revision.
  await cp.deployments.apply({ ...QWEN, replicas: 2, rollout: { progress_deadline_seconds: 90 } });
  assertEquals(cp.deployments.get("qwen").revision, 1);
  const withArgs = (n: number) => ({
    ...QWEN,
    replicas: 2,
    profiles: [{ ...QWEN.profiles[0], engine_args: ["--max-model-len", String(1024 * n)] }],
  });
  for (let n = 1; n <= 12; n++) await cp.deployments.apply(withArgs(n));
  const d = cp.deployments.get("qwen");
  assertEquals(d.revision, 13);
  // Replicas still run revision 1 (nothing reconciled since): it is kept past the bound.
  assertEquals(d.history!.map((h) => h.revision), [1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
  assertEquals(d.history!.at(-1)!.outcome, "rolling_out");
  assertEquals(d.history![1].outcome, "superseded");
  // The last one known good stays the one to go back to.
  assertEquals([d.rollout?.target, d.rollout?.fallback], [13, 1]);
  assertEquals((await store.listDeployments())[0].history, d.history);
  const started = (await cp.events.list({ limit: 1000 })).filter((e) =>
    e.kind === "rollout_started"
  );
  assertEquals(started.length, 12);
  assertStringIncludes(started[0].message, "revision 2 (a changed spec)");
});
