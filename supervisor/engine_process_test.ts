import { join } from "node:path";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { shardLaunch } from "../tests/shard_launch.ts";
import { EngineProcess } from "./engine_process.ts";
import { readPidFile } from "./pid_file.ts";

Deno.test("EngineProcess: spawned with its pid file, killed whole with its exit known, forgotten; adopted by /proc", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_engine_process_test_" });
  const pidFile = join(dir, "pid.json");
  const facts = {
    shard_id: "s",
    engine: "test",
    spec_hash: "h",
    port: 20_000,
    ports: [20_000],
    log_path: join(dir, "engine.log"),
    launch: shardLaunch("s", 20_000),
  };
  const clock = new FakeClock();
  const env = { PATH: Deno.env.get("PATH")! };
  const p = EngineProcess.spawn(["sleep", "30"], env, pidFile, facts, clock.now());
  try {
    const read = readPidFile(pidFile);
    assertOk("record" in read, JSON.stringify(read));
    assertEquals([read.record.pid, read.record.pgid, read.record.port], [p.pid, p.pid, 20_000]);
    // Dated by the supervisor's clock, not the wall clock.
    assertEquals(read.record.started_at, clock.now());
    assertEquals([p.alive(), p.adopted, p.exit], [true, false, null]);
    // The same process taken over as a next agent would: alive by /proc.
    const adopted = EngineProcess.adopt(read.record, pidFile);
    assertEquals([adopted.alive(), adopted.adopted], [true, true]);
    assertEquals(await p.endsWithin(50), false);
    await p.kill(0);
    assertEquals([p.alive(), p.exit?.signal, p.members()], [false, "SIGKILL", []]);
    assertEquals(adopted.alive(), false);
    p.forget();
    assertEquals(readPidFile(pidFile), { error: "missing" });
  } finally {
    try {
      Deno.kill(-p.pid, "SIGKILL");
    } catch {
      // Gone.
    }
    await Deno.remove(dir, { recursive: true });
  }
});
