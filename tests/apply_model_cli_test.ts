/**
 * `llmgw apply -f` against the model's own files (issue #25 item 6): a
 * model given as a local path is read by the control plane, and a profile
 * whose GPUs cannot hold it, or whose tensor_parallel does not divide its
 * heads, is refused with the numbers; `--max-model-len` that makes it fit
 * is accepted.
 */
import { join } from "node:path";
import { main } from "../cli/main.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { startControl } from "../control/server.ts";
import { assertEquals, assertStringIncludes } from "./assert.ts";
import { fixturePath } from "./fixtures.ts";
import { registration } from "./registration.ts";

const ADMIN = "llmgw_admin_apply-model-test";

Deno.test("apply -f refuses a model the GPUs cannot hold or a TP that does not divide its heads", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-apply-model-" });
  const control = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: [ADMIN],
    joinTokens: ["llmgw_join_apply-model-test"],
    reconcileMs: 50,
  });
  try {
    // One node with 8 RTX 4090s (24,564 MiB each).
    await control.cp.nodes.register(registration("n1"), null);
    const llama = join(dir, "llama-3.1-8b");
    await Deno.mkdir(llama);
    for (const f of ["config.json", "model.safetensors.index.json"]) {
      await Deno.copyFile(fixturePath(`model_configs/llama-3.1-8b-instruct/${f}`), join(llama, f));
    }
    const qwen = join(dir, "qwen2.5-7b");
    await Deno.mkdir(qwen);
    await Deno.copyFile(
      fixturePath("model_configs/qwen2.5-7b-instruct/config.json"),
      join(qwen, "config.json"),
    );
    await Deno.writeFile(join(qwen, "model.safetensors"), new Uint8Array(64));
    const apply = async (name: string, model: string, tp: number, args: string[] = []) => {
      const path = join(dir, `${name}.yaml`);
      await Deno.writeTextFile(
        path,
        `name: ${name}\nmodel: ${model}\nprofiles:\n  - name: p\n    engine: vllm\n` +
          `    gpu_class: rtx4090-24g\n    tensor_parallel: ${tp}\n` +
          `    engine_args: ${JSON.stringify(args)}\n`,
      );
      let out = "";
      const code = await main(["apply", "-f", path, "--url", control.url, "--token", ADMIN], {
        out: (t) => out += t,
        err: (t) => out += t,
      });
      return { code, out };
    };
    // Llama-3.1-8B at its full 131,072 tokens: 14.96 GiB of weights + 16 GiB of KV cache.
    const full = await apply("full", llama, 1);
    assertEquals(full.code, 1, full.out);
    assertStringIncludes(
      full.out,
      'profile "p": insufficient_gpu_memory: needs 31.0 GiB per GPU (weights 15.0 + KV cache for ' +
        "one 131072-token sequence 16.0) but an rtx4090-24g GPU offers 21.6 GiB (24.0 GiB × 0.90)",
    );
    // --max-model-len 8192, as operators run it on 24 GB cards: 1 GiB of KV cache, accepted.
    const short = await apply("short", llama, 1, ["--max-model-len", "8192"]);
    assertEquals(short.code, 0, short.out);
    assertEquals(short.out.includes("warning"), false, short.out);
    // Qwen2.5-7B's 28 heads: TP 8 never starts.
    const tp8 = await apply("qwen", qwen, 8);
    assertEquals(tp8.code, 1, tp8.out);
    assertStringIncludes(
      tp8.out,
      "Total number of attention heads (28) must be divisible by tensor parallel size (8)",
    );
    assertEquals(control.cp.deployments.list().map((d) => d.name), ["short"]);
  } finally {
    await control.close();
    await Deno.remove(dir, { recursive: true });
  }
});
