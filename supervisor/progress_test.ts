import { assertEquals } from "../tests/assert.ts";
import { compilePatterns, matchProgress } from "./progress.ts";
import { vllmPlugin } from "../engines/vllm.ts";
import { ENGINE_API_VERSION } from "../engines/types.ts";

Deno.test("matchProgress reads percent and shards from vLLM's real log lines", () => {
  const patterns = compilePatterns([
    { regex: "(?<percent>\\d+)% Completed \\| (?<done>\\d+)/(?<total>\\d+)" },
  ]);
  assertEquals(
    matchProgress(
      "Loading safetensors checkpoint shards:  45% Completed | 9/20 [00:10<00:12]",
      patterns,
    ),
    { percent: 45, done: 9, total: 20 },
  );
  assertEquals(matchProgress("INFO 05-01 api_server.py: args", patterns), null);
});

Deno.test("matchProgress derives the percent from done/total", () => {
  const patterns = compilePatterns([{ regex: "shards (?<done>\\d+)/(?<total>\\d+)" }]);
  assertEquals(matchProgress("shards 3/4", patterns), { percent: 75, done: 3, total: 4 });
});

Deno.test("a plugin's pattern that does not compile is skipped, not fatal", () => {
  assertEquals(compilePatterns([{ regex: "(" }, { regex: "ok" }]).length, 1);
});

Deno.test("the vLLM plugin's own patterns drive the supervisor's progress", () => {
  const probes = vllmPlugin.probes({
    api_version: ENGINE_API_VERSION,
    deployment: "d",
    replica_id: "r",
    shard_id: "r/0",
    model: "m",
    served_model_name: "m",
    profile: {
      name: "p",
      tensor_parallel: 1,
      pipeline_parallel: 1,
      nodes: 1,
      gpus_per_node: 1,
      quantization: "none",
      engine_args: [],
      engine_options: {},
      env: {},
    },
    rank: 0,
    world: { nodes: 1, leader_addr: "127.0.0.1", rendezvous_port: 29500, leader_http_port: 8000 },
    gpus: [{ index: 0, class: "l40s-45g", compute_capability: "8.9" }],
    fabric: null,
    node: { id: "n", mgmt_addr: "127.0.0.1", mgmt_interface: null },
    port: 8000,
    engine_version: null,
  });
  const p = matchProgress(
    "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00s/it]",
    compilePatterns(probes.loading_progress),
  );
  assertEquals(p?.percent, 50);
});
