import { decodeDocuments } from "../cli/apply_sources.ts";
import { parseDeploymentText } from "../deployment/load.ts";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { reportAll, testControl } from "../tests/control_fixture.ts";
import { registration } from "../tests/registration.ts";
import type { ControlPlane } from "./control_plane.ts";
import { InvalidInputError } from "./errors.ts";

const EXAMPLE = new URL("../dev/samples/llama-8b.yaml", import.meta.url);
const NODES = ["h1", "h2", "h3"];

/** Three H100 nodes that report both engines, running the dev example, every shard ready. */
async function running(): Promise<{ cp: ControlPlane; text: string }> {
  const t = await testControl();
  const cp = t.cp;
  for (const id of NODES) {
    const reg = registration(id, "dgx_h100_8x_nics", {
      engine_versions: { vllm: "0.11.1", sglang: "0.5.5" },
    });
    // The recording's GPUs are busy and report no capability: here they are
    // idle H100s at 9.0 (fp8 needs 8.9).
    const gpus = reg.gpus.map((g) => ({
      ...g,
      compute_capability: "9.0",
      memory_used_mb: 0,
      health: { ...g.health, problems: [] },
    }));
    await cp.nodes.register({ ...reg, gpus }, null);
  }
  const text = await Deno.readTextFile(EXAMPLE);
  // What `llmgw dev` does: the spec it parsed itself, defaults filled in.
  await cp.deployments.apply(parseDeploymentText(text, "llama-8b.yaml").deployment);
  await cp.reconcile();
  for (const id of NODES) await reportAll(cp, id, "ready");
  await cp.reconcile();
  return { cp, text };
}

/** Each replica with its revision and shard ids: a restart changes the shard ids. */
function fleet(cp: ControlPlane): string[] {
  return cp.replicas().map((r) =>
    `${r.id}@${r.revision}:${r.shards.map((s) => s.shard_id).join(",")}`
  )
    .sort();
}

Deno.test("apply: re-applying the dev example as the CLI sends it is unchanged: no revision, no restart, nothing stored", async () => {
  const { cp, text } = await running();
  const before = fleet(cp);
  assertEquals(before.length, 3);
  assertOk(
    cp.replicas().every((r) => r.state === "ready"),
    JSON.stringify(cp.replicas().map((r) => [r.id, r.state, r.shards.map((s) => s.state)])),
  );
  const stored = cp.deployments.get("llama-8b");
  const events = (await cp.events.list({ limit: 1000 })).length;
  // What `llmgw apply -f dev/samples/llama-8b.yaml` sends: the decoded YAML.
  const doc = decodeDocuments(text, "dev/samples/llama-8b.yaml")[0].doc;
  const r = await cp.deployments.apply(doc);
  assertEquals([r.result, r.created, r.revision, r.changes, r.rolling, r.dry_run], [
    "unchanged",
    false,
    1,
    [],
    [],
    false,
  ]);
  await cp.reconcile();
  await cp.reconcile();
  const after = cp.deployments.get("llama-8b");
  assertEquals([after.revision, after.rollout, after.history?.length], [1, null, 1]);
  assertEquals(after.updated_at, stored.updated_at);
  assertEquals(fleet(cp), before);
  assertEquals((await cp.events.list({ limit: 1000 })).length, events);
});

Deno.test("apply: the count alone is scaled, routing alone configured; neither rolls anything", async () => {
  const { cp, text } = await running();
  const doc = decodeDocuments(text, "llama-8b.yaml")[0].doc as Record<string, unknown>;
  const before = fleet(cp);
  const scaled = await cp.deployments.apply({ ...doc, replicas: 2 });
  assertEquals([scaled.result, scaled.revision, scaled.rolling], ["scaled", 1, []]);
  assertEquals(scaled.changes, [{ path: "replicas", from: 3, to: 2, rolls: false }]);
  const routed = await cp.deployments.apply({ ...doc, replicas: 2, routing: "random" });
  assertEquals([routed.result, routed.revision], ["configured", 1]);
  assertEquals(routed.changes.map((c) => c.path), ["routing"]);
  assertEquals(cp.deployments.routing()["llama-8b"], "random");
  await cp.reconcile();
  // One replica fewer; the two left are the ones that ran before.
  const after = fleet(cp);
  assertEquals(after.length, 2);
  assertOk(after.every((r) => before.includes(r)), `${after} ⊄ ${before}`);
  const kinds = (await cp.events.list({ limit: 1000 })).map((e) => e.kind);
  assertOk(!kinds.includes("rollout_started"));
});

Deno.test("apply --dry-run: validated, answers the changes and the replicas that would roll, changes nothing", async () => {
  const { cp, text } = await running();
  const doc = decodeDocuments(text, "llama-8b.yaml")[0].doc as {
    profiles: Record<string, unknown>[];
  };
  const before = fleet(cp);
  const stored = JSON.stringify(cp.deployments.list());
  const events = (await cp.events.list({ limit: 1000 })).length;
  const changed = {
    ...doc,
    profiles: [{ ...doc.profiles[0], engine_args: ["--max-model-len", "8192"] }, doc.profiles[1]],
  };
  const r = await cp.deployments.apply(changed, { dryRun: true });
  assertEquals([r.result, r.revision, r.dry_run, r.created], ["updated", 2, true, false]);
  assertEquals(r.changes, [{
    path: "profiles[0].engine_args",
    from: [],
    to: ["--max-model-len", "8192"],
    rolls: true,
  }]);
  assertEquals(r.rolling, ["llama-8b-r0", "llama-8b-r1", "llama-8b-r2"]);
  // A new deployment: created, in a dry run nothing is.
  const fresh = await cp.deployments.apply({ ...doc, name: "other", served_model_name: "other" }, {
    dryRun: true,
  });
  assertEquals([fresh.result, fresh.created, fresh.revision], ["created", true, 1]);
  // Validated as an apply is.
  let refused: unknown = null;
  try {
    await cp.deployments.apply({ ...doc, replicas: -1 }, { dryRun: true });
  } catch (e) {
    refused = e;
  }
  assertOk(refused instanceof InvalidInputError, String(refused));
  await cp.reconcile();
  assertEquals(JSON.stringify(cp.deployments.list()), stored);
  assertEquals(fleet(cp), before);
  assertEquals((await cp.events.list({ limit: 1000 })).length, events);
  // The real apply does what the dry run said.
  const applied = await cp.deployments.apply(changed);
  assertEquals([applied.result, applied.revision, applied.rolling], ["updated", 2, r.rolling]);
});

Deno.test("rollout undo: an older revision's workload under today's count and routing", async () => {
  const { cp, text } = await running();
  const doc = decodeDocuments(text, "llama-8b.yaml")[0].doc as {
    profiles: Record<string, unknown>[];
  };
  const changed = {
    ...doc,
    profiles: [{ ...doc.profiles[0], engine_args: ["--max-model-len", "8192"] }, doc.profiles[1]],
  };
  assertEquals((await cp.deployments.apply(changed)).result, "updated");
  const set = await cp.deployments.apply({ ...changed, replicas: 2, routing: "random" });
  assertEquals([set.result, set.revision], ["configured", 2]);
  const undone = await cp.deployments.undo("llama-8b");
  assertEquals([undone.revision, undone.spec.replicas, undone.spec.routing], [3, 2, "random"]);
  assertEquals(undone.spec.profiles[0].engine_args, []);
});
