/**
 * Tests of the fake engine's log output (dev/fake_engine/fake_engine_log.ts): its
 * tqdm progress lines against the plugins' loading-progress patterns.
 */
import { assertEquals, assertOk } from "../../tests/assert.ts";
import { SGLANG_PROGRESS, VLLM_PROGRESS } from "../../tests/fake_engine_harness.ts";
import { progressBar } from "./fake_engine_log.ts";

Deno.test("progress lines match the plugins' loading-progress patterns", () => {
  assertEquals(
    progressBar(1, 4, 1),
    "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:01<00:03,  1.00s/it]",
  );
  assertEquals(
    progressBar(0, 4, 0),
    "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
  );
  for (let done = 0; done <= 4; done++) {
    const line = `(EngineCore_DP0 pid=42) ${progressBar(done, 4, done * 0.3)}`;
    for (const re of [...VLLM_PROGRESS, ...SGLANG_PROGRESS]) {
      const g = re.exec(line)?.groups;
      assertOk(g !== undefined, `${re} must match ${line}`);
      assertEquals([g.done, g.total], [String(done), "4"]);
      if (g.percent !== undefined) assertEquals(g.percent, String(done * 25));
    }
  }
});
