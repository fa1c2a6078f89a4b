/**
 * `llmgw apply -f` warns, and still stores, a deployment whose profile no
 * node can hold (TP 16 on 8-GPU nodes) or whose replicas need more GPUs than
 * the whole cluster has (issue #23 item 5); one that fits gets no warning.
 * `scale` past what the fleet holds warns the same way.
 */
import { join } from "node:path";
import { main } from "../cli/main.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { startControl } from "../control/server.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { registration } from "./registration.ts";

const ADMIN = "llmgw_admin_apply-warnings-test";

function yaml(name: string, replicas: number, tp: number): string {
  return [
    `name: ${name}`,
    "model: Qwen/Qwen2.5-7B-Instruct",
    `replicas: ${replicas}`,
    "profiles:",
    "  - name: p",
    "    engine: vllm",
    "    gpu_class: rtx4090-24g",
    `    tensor_parallel: ${tp}`,
    "",
  ].join("\n");
}

Deno.test("apply -f and scale warn about a profile no node can hold and replicas the fleet cannot hold", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-apply-warnings-" });
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: [ADMIN],
    joinTokens: ["llmgw_join_apply-warnings-test"],
    reconcileMs: 50,
  });
  try {
    // One node with 8 rtx4090-24g GPUs.
    await control.cp.nodes.register(registration("n1"), null);
    const apply = async (name: string, replicas: number, tp: number) => {
      const path = join(dir, `${name}.yaml`);
      await Deno.writeTextFile(path, yaml(name, replicas, tp));
      let out = "";
      const code = await main(["apply", "-f", path, "--url", control.url, "--token", ADMIN], {
        out: (t) => out += t,
        err: (t) => out += t,
      });
      return { code, out };
    };
    const tp16 = await apply("tp16", 1, 16);
    assertEquals(tp16.code, 0, tp16.out);
    assertStringIncludes(tp16.out, "warning");
    assertStringIncludes(
      tp16.out,
      'profile "p": a shard needs 16 rtx4090-24g GPUs on one node, but no node has more than 8, so this profile can never be placed: use nodes: 2 (8 GPUs per node) or a smaller tensor_parallel',
    );
    const many = await apply("many", 3, 4);
    assertEquals(many.code, 0, many.out);
    assertStringIncludes(
      many.out,
      "3 replicas need 12 rtx4090-24g GPUs (4 each), but the cluster has 8 in all: at most 2 can ever run",
    );
    const fits = await apply("fits", 2, 4);
    assertEquals(fits.code, 0, fits.out);
    assertEquals(fits.out.includes("warning"), false, fits.out);
    // Scaling past what the fleet holds answers the same warning.
    const scaled = await fetch(`${control.url}/v1/deployments/fits/scale`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify({ replicas: 3 }),
    });
    assertEquals(scaled.status, 200);
    assertEquals((await scaled.json()).warnings, [{
      path: ["replicas"],
      message:
        "3 replicas need 12 rtx4090-24g GPUs (4 each), but the cluster has 8 in all: at most 2 can ever run",
    }]);
    // `llmgw scale` prints it on stderr, so --json output stays JSON.
    let scaleOut = "";
    let scaleErr = "";
    const code = await main(["scale", "fits", "3", "--url", control.url, "--token", ADMIN], {
      out: (t) => scaleOut += t,
      err: (t) => scaleErr += t,
    });
    assertEquals(code, 0, scaleErr);
    assertStringIncludes(scaleOut, "deployment fits scaled to 3");
    assertEquals(
      scaleErr,
      "warning: deployment/fits: 3 replicas need 12 rtx4090-24g GPUs (4 each), but the cluster has 8 in all: at most 2 can ever run\n",
    );
    // Warnings do not refuse: the hardware may still arrive.
    assertEquals(control.cp.deployments.list().map((d) => d.name).sort(), [
      "fits",
      "many",
      "tp16",
    ]);
  } finally {
    await control.close();
    await Deno.remove(dir, { recursive: true });
  }
});
