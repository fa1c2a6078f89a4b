/**
 * spawnRun's refusals: what would be refused again is permanent, and no
 * refusal holds the engine's key.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { desiredLaunch, shardLaunch } from "../tests/shard_launch.ts";
import type { ShardSpec } from "../engines/types.ts";
import { spawnRun } from "./shard_process.ts";
import { resolveOptions } from "./supervisor.ts";

Deno.test("spawnRun: a stored key the key rule refuses is a permanent failure that names the rule, not the key", async () => {
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_shard_process_test_" });
  try {
    const dir = join(stateDir, "shards", "s");
    Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
    // Written by hand: a space cannot travel in a Bearer header, on every start alike.
    const key = "hand written key 0123456789";
    Deno.writeTextFileSync(join(dir, "engine_key"), key + "\n", { mode: 0o600 });
    const spec: ShardSpec = {
      problems: [],
      command: { argv: ["/bin/true"], env: {} },
      probes: null,
      metrics: null,
      api_key: { flag: "--api-key" },
    };
    let followed = false;
    const run = spawnRun(
      { id: "s", engine: "test", launch: desiredLaunch("s") },
      "hash",
      { dir, pidFile: join(dir, "pid.json"), log: join(dir, "engine.log") },
      resolveOptions({ stateDir, onEvent: () => {} }),
      { launch: shardLaunch("s", 1), ports: [], spec },
      () => followed = true,
    );
    assertOk("reason" in run, "refused");
    assertEquals(run.kind, "permanent");
    assertStringIncludes(run.reason, "visible ASCII");
    assertStringIncludes(run.reason, `${join(dir, "engine_key")}: remove it`);
    assertOk(!run.reason.includes(key), "the reason holds no key");
    assertOk(followed, "the log was followed first");
    assertEquals([...Deno.readDirSync(dir)].some((e) => e.name === "pid.json"), false);
  } finally {
    await Deno.remove(stateDir, { recursive: true });
  }
});
