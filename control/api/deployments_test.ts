import { hashToken } from "../../http/tokens.ts";
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { registration } from "../../tests/registration.ts";
import { createControlApi } from "../api.ts";
import { ControlPlane } from "../control_plane.ts";
import { MemoryStore } from "../store/memory_store.ts";

const ADMIN = "admin-secret";

const QWEN = {
  name: "qwen",
  model: "Qwen/Qwen2.5-7B-Instruct",
  replicas: 2,
  profiles: [{ name: "tp2", engine: "vllm", gpu_class: "rtx4090-24g", tensor_parallel: 2 }],
};

async function setup() {
  const cp = await ControlPlane.open({ store: new MemoryStore(), reconcileMs: 60_000 });
  await cp.nodes.register(registration("n1"), null);
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken(ADMIN)],
    joinTokenHashes: [],
  });
  const apply = async (body: unknown, query = "") => {
    const res = await app.request(`/v1/deployments${query}`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: await res.json() };
  };
  return { cp, app, apply };
}

Deno.test("POST /v1/deployments?dry_run=true: validated, answers what an apply would do, stores nothing", async () => {
  const { cp, apply } = await setup();
  const dry = await apply(QWEN, "?dry_run=true");
  assertEquals(dry.status, 200);
  assertEquals([dry.json.result, dry.json.created, dry.json.dry_run], ["created", true, true]);
  assertEquals(cp.deployments.list(), []);

  const created = await apply(QWEN);
  assertEquals([created.status, created.json.result, created.json.dry_run], [
    201,
    "created",
    false,
  ]);
  await cp.reconcile();
  const stored = JSON.stringify(cp.deployments.list());
  const replicas = JSON.stringify(cp.replicas());

  // The same spec, keys in another order and a default written out: unchanged.
  const again = await apply({
    profiles: [{ tensor_parallel: 2, gpu_class: "rtx4090-24g", engine: "vllm", name: "tp2" }],
    replicas: 2,
    placement: "pack",
    model: QWEN.model,
    name: "qwen",
  });
  assertEquals([again.status, again.json.result, again.json.revision], [200, "unchanged", 1]);

  const changed = { ...QWEN, profiles: [{ ...QWEN.profiles[0], quantization: "fp8" }] };
  const diff = await apply(changed, "?dry_run=true");
  assertEquals(diff.status, 200);
  assertEquals(
    [diff.json.result, diff.json.revision, diff.json.rolling],
    ["updated", 2, ["qwen-r0", "qwen-r1"]],
  );
  assertEquals(diff.json.changes, [{
    path: "profiles[0].quantization",
    from: "none",
    to: "fp8",
    rolls: true,
  }]);
  await cp.reconcile();
  assertEquals(JSON.stringify(cp.deployments.list()), stored);
  assertEquals(JSON.stringify(cp.replicas()), replicas);
});

Deno.test("POST /v1/deployments?dry_run: a bad value or a bad body is a 400 naming it, never a 500", async () => {
  const { cp, apply } = await setup();
  const bad = await apply(QWEN, "?dry_run=yes");
  assertEquals(bad.status, 400);
  assertEquals(bad.json.error.path, "dry_run");
  const body = await apply({ ...QWEN, replicas: "two" }, "?dry_run=true");
  assertEquals(body.status, 400);
  assertEquals(body.json.error.path, "replicas");
  assertEquals(cp.deployments.list(), []);
});

Deno.test("POST /v1/deployments: a profile env holding a hub token or llmgw's hub settings is a 400 naming the field; the token is nowhere in the answer", async () => {
  const { cp, apply } = await setup();
  const secret = "hf_profile_env_secret_0123456789";
  const cases: [Record<string, string>, string, string][] = [
    [{ HF_TOKEN: secret }, "profiles[0].env.HF_TOKEN", "hub credential"],
    [{ HUGGING_FACE_HUB_TOKEN: secret }, "profiles[0].env.HUGGING_FACE_HUB_TOKEN", "credential"],
    [{ HF_TOKEN_PATH: "/root/token" }, "profiles[0].env.HF_TOKEN_PATH", "credential"],
    [{ HF_HUB_OFFLINE: "0" }, "profiles[0].env.HF_HUB_OFFLINE", "set by llmgw"],
    [{ HF_ENDPOINT: "https://mirror.example" }, "profiles[0].env.HF_ENDPOINT", "set by llmgw"],
  ];
  for (const [env, path, words] of cases) {
    for (const query of ["", "?dry_run=true"]) {
      const res = await apply({ ...QWEN, profiles: [{ ...QWEN.profiles[0], env }] }, query);
      assertEquals(res.status, 400, `${path}${query}`);
      const said = JSON.stringify(res.json);
      assertStringIncludes(said, path);
      assertStringIncludes(said, words);
      assertOk(!said.includes(secret), `the token is in the answer: ${said}`);
    }
  }
  const token = await apply({ ...QWEN, profiles: [{ ...QWEN.profiles[0], env: cases[0][0] }] });
  assertStringIncludes(token.json.error.message, "docs/models.md");
  assertEquals(cp.deployments.list(), []);
  // Other variables are the operator's.
  const ok = await apply({ ...QWEN, profiles: [{ ...QWEN.profiles[0], env: { VLLM_X: "1" } }] });
  assertEquals(ok.status, 201);
});

Deno.test("POST /v1/deployments: a profile env setting an engine's keep-alive under 5 s is a 400 naming the field", async () => {
  const { cp, apply } = await setup();
  const withEnv = (env: Record<string, string>) => ({
    ...QWEN,
    profiles: [{ ...QWEN.profiles[0], env }],
  });
  const low = await apply(withEnv({ VLLM_HTTP_TIMEOUT_KEEP_ALIVE: "2" }));
  assertEquals(low.status, 400);
  assertStringIncludes(JSON.stringify(low.json), "profiles[0].env.VLLM_HTTP_TIMEOUT_KEEP_ALIVE");
  assertStringIncludes(low.json.error.message, "at least 5");
  assertEquals(cp.deployments.list(), []);
  const ok = await apply(withEnv({ VLLM_HTTP_TIMEOUT_KEEP_ALIVE: "30" }));
  assertEquals(ok.status, 201);
});

Deno.test("the OpenAPI document shows apply's dry_run query and its answer's result", async () => {
  const { app } = await setup();
  const res = await app.request("/openapi.json", {
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  const doc = await res.json();
  const op = doc.paths["/v1/deployments"].post;
  assertOk(
    op.parameters.some((p: { name: string; in: string }) =>
      p.name === "dry_run" && p.in === "query"
    ),
  );
  assertStringIncludes(JSON.stringify(op.responses), "unchanged");
});
