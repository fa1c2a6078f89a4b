/**
 * `llmgw apply -f` against a running control plane refuses, before anything
 * is stored, a deployment whose engine arguments set a flag llmgw owns, and
 * names the field; a valid deployment in the same run is accepted.
 */
import { join } from "node:path";
import { main } from "../cli/main.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { startControl } from "../control/server.ts";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { registration } from "./registration.ts";

const ADMIN = "llmgw_admin_apply-cli-test";

function yaml(name: string, engine: string, args: string[]): string {
  return [
    `name: ${name}`,
    "model: Qwen/Qwen2.5-7B-Instruct",
    "replicas: 1",
    "profiles:",
    "  - name: tp2",
    `    engine: ${engine}`,
    "    gpu_class: rtx4090-24g",
    "    tensor_parallel: 2",
    `    engine_args: [${args.map((a) => JSON.stringify(a)).join(", ")}]`,
    "",
  ].join("\n");
}

Deno.test("apply -f refuses owned engine flags with the field path; nothing of them ever runs", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-apply-" });
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: [ADMIN],
    joinTokens: ["llmgw_join_apply-cli-test"],
    reconcileMs: 50,
  });
  try {
    await control.cp.nodes.register(registration("n1"), null);
    const apply = async (file: string, text: string) => {
      const path = join(dir, file);
      await Deno.writeTextFile(path, text);
      let out = "";
      let err = "";
      const code = await main(["apply", "-f", path, "--url", control.url, "--token", ADMIN], {
        out: (t) => out += t,
        err: (t) => err += t,
      });
      return { code, out, err };
    };
    const refused: [string, string, string[], string][] = [
      ["vllm-tp", "vllm", ["--tensor-parallel-size", "4"], "--tensor-parallel-size"],
      ["vllm-port", "vllm", ["--port", "9000"], "--port"],
      ["sglang-tp", "sglang", ["--tp-size", "2"], "--tp-size"],
    ];
    for (const [name, engine, args, flag] of refused) {
      const r = await apply(`${name}.yaml`, yaml(name, engine, args));
      assertOk(r.code !== 0, `${name}: exit ${r.code}, ${r.out}`);
      assertStringIncludes(r.err, "profiles[0].engine_args");
      assertStringIncludes(r.err, flag);
      assertOk(!r.err.includes("at "), `no stack trace: ${r.err}`);
    }
    const ok = await apply("good.yaml", yaml("good", "vllm", ["--max-model-len", "8192"]));
    assertEquals(ok.code, 0, ok.err);
    // Two passes now: the replica is created and placed.
    await control.cp.reconcile();
    await control.cp.reconcile();
    const replicas = control.cp.replicas();
    assertEquals(replicas.map((r) => r.deployment), ["good"]);
    assertEquals(control.cp.deployments.list().map((d) => d.name), ["good"]);
    const events = await control.cp.events.list({ limit: 1000 });
    assertEquals(
      events.filter((e) => /vllm-tp|vllm-port|sglang-tp/.test(e.subject + e.message)),
      [],
      "a refused deployment leaves no event",
    );
  } finally {
    await control.close();
    await Deno.remove(dir, { recursive: true });
  }
});
