import { assertEquals, assertOk } from "../../tests/assert.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { launch } from "../../tests/fake_engine_harness.ts";
import type { DesiredShard } from "../../protocol/agent_protocol.ts";
import type { DesiredLaunch } from "../../engines/types.ts";
import { createLogger } from "../../log/log.ts";
import { compileCacheDir, compileCacheKeyInput } from "../../engines/compile_cache.ts";
import { denoCacheFs } from "../model_cache/cache_fs.ts";
import { type EngineCacheEvicted, EngineCacheKeeper } from "./engine_cache_keeper.ts";
import { parseRecord, RECORD_FILE } from "./engine_cache_record.ts";
import { treeBytes } from "./tree_bytes.ts";

const C1 = "1".repeat(40);
const C2 = "2".repeat(40);

/** A shard of `org/fake-model-8b` at `commit`, tensor-parallel `tp`. */
function shard(commit: string, tp = 1): DesiredShard<DesiredLaunch> {
  const l = { ...launch({ tp, port: 8000 }), model_commit: commit };
  return { id: `${commit.slice(0, 4)}-tp${tp}`, engine: "vllm", launch: l };
}

/** What an engine leaves in its directory: some compiled bytes. */
async function compile(dir: string): Promise<void> {
  await Deno.mkdir(`${dir}/vllm/torch_compile_cache`, { recursive: true });
  await Deno.writeFile(`${dir}/vllm/torch_compile_cache/graph.bin`, new Uint8Array(8192));
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

function harness(root: string, o: { held?: Set<string> } = {}) {
  const disk = { usedBytes: 100_000 };
  const lines: string[] = [];
  const events: EngineCacheEvicted[] = [];
  const inUse: DesiredShard<DesiredLaunch>[] = [];
  const clock = new FakeClock();
  const total = 1_000_000;
  const keeper = new EngineCacheKeeper({
    root,
    inUse: () => inUse,
    held: o.held === undefined ? undefined : () => Promise.resolve(o.held!),
    installed: () => ({ vllm: "0.11.1" }),
    // A sliver between the marks: one directory's bytes bring the disk under the low one.
    marks: { highPercent: 90, lowPercent: 89.999 },
    clock,
    log: createLogger("agent", (l) => lines.push(l)),
    onEvicted: (e) => events.push(e),
    fs: {
      ...denoCacheFs,
      diskUsage: () => Promise.resolve({ totalBytes: total, freeBytes: total - disk.usedBytes }),
    },
  });
  return { keeper, lines, events, inUse, clock, disk };
}

Deno.test("a start records its directory's key and last use", async () => {
  const root = await Deno.makeTempDir();
  try {
    const h = harness(root);
    const dir = await h.keeper.use("vllm", shard(C1).launch);
    assertOk(dir.startsWith(`${root}/vllm/`));
    assertEquals((await Deno.stat(dir)).mode! & 0o777, 0o700);
    const record = parseRecord(await Deno.readTextFile(`${dir}/${RECORD_FILE}`));
    assertEquals(record?.key.revision, C1);
    assertEquals(record?.last_used_ms, h.clock.now());
    h.clock.advance(5000);
    assertEquals(await h.keeper.use("vllm", shard(C1).launch), dir);
    const again = parseRecord(await Deno.readTextFile(`${dir}/${RECORD_FILE}`));
    assertEquals(again?.last_used_ms, h.clock.now());
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("a revision evicted from the model cache takes its engine cache directories", async () => {
  const root = await Deno.makeTempDir();
  try {
    const held = new Set([`org/fake-model-8b@${C1}`, `org/fake-model-8b@${C2}`]);
    const h = harness(root, { held });
    const kept = await h.keeper.use("vllm", shard(C1).launch);
    const gone1 = await h.keeper.use("vllm", shard(C2).launch);
    const gone2 = await h.keeper.use("vllm", shard(C2, 2).launch);
    for (const d of [kept, gone1, gone2]) await compile(d);
    // Nothing goes while the weights are there.
    assertEquals(await h.keeper.sweep(), []);

    held.delete(`org/fake-model-8b@${C2}`);
    const evicted = await h.keeper.sweep();
    assertEquals(evicted.map((e) => e.cause), ["revision_evicted", "revision_evicted"]);
    assertEquals(await exists(gone1), false);
    assertEquals(await exists(gone2), false);
    assertEquals(await exists(`${kept}/vllm/torch_compile_cache/graph.bin`), true);
    assertEquals(h.events.map((e) => [e.model, e.revision, e.cause]), [
      ["org/fake-model-8b", C2, "revision_evicted"],
      ["org/fake-model-8b", C2, "revision_evicted"],
    ]);
    assertOk(h.events.every((e) => e.bytes >= 8192), JSON.stringify(h.events));
    assertEquals(h.lines.filter((l) => l.includes("engine cache evicted")).length, 2);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("over the high watermark: the least recently used unused directory goes, one in use stays", async () => {
  const root = await Deno.makeTempDir();
  try {
    const h = harness(root);
    const oldest = shard(C1, 1);
    const older = shard(C1, 2);
    const newer = shard(C1, 4);
    const dirs = [];
    for (const s of [oldest, older, newer]) {
      // Under the high watermark for these: each start sweeps too.
      dirs.push(await h.keeper.use(s.engine, s.launch));
      await compile(dirs.at(-1)!);
      h.clock.advance(60_000);
    }
    // The oldest runs; the next start finds the disk over the high watermark.
    h.inUse.push(oldest);
    h.disk.usedBytes = 900_500;
    const started = await h.keeper.use("vllm", shard(C2).launch);
    assertEquals(await exists(dirs[0]), true, "in use: kept");
    assertEquals(await exists(dirs[1]), false, "least recently used, unused: evicted");
    assertEquals(await exists(dirs[2]), true, "enough was freed");
    assertEquals(await exists(started), true, "the starting one: kept");
    assertEquals(h.events.map((e) => e.cause), ["disk_pressure"]);
    assertOk(h.events[0].reason.includes("over the high watermark of 90%"), h.events[0].reason);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("a directory from before keys carried the commit: kept while its shard runs, else ordered by mtime", async () => {
  const root = await Deno.makeTempDir();
  try {
    const h = harness(root);
    const running = shard(C1);
    const legacy = (s: DesiredShard<DesiredLaunch>) =>
      compileCacheDir(root, { ...compileCacheKeyInput(s.engine, s.launch), revision: null });
    // An older agent made these, without a record.
    for (const s of [running, shard(C1, 2)]) await compile(legacy(s));
    h.inUse.push(running);
    h.disk.usedBytes = 950_000;
    const evicted = await h.keeper.sweep();
    assertEquals(evicted.map((e) => e.entry.dir), [legacy(shard(C1, 2))]);
    assertEquals(evicted[0].entry.key, null);
    assertEquals(await exists(legacy(running)), true);
    assertEquals(h.events.map((e) => [e.engine, e.model]), [["vllm", null]]);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("a sweep that fails never fails the start: the directory is handed out, the failure logged", async () => {
  const root = await Deno.makeTempDir();
  try {
    const lines: string[] = [];
    const keeper = new EngineCacheKeeper({
      root,
      inUse: () => [],
      installed: () => null,
      marks: { highPercent: 90, lowPercent: 80 },
      clock: new FakeClock(),
      log: createLogger("agent", (l) => lines.push(l)),
      fs: { ...denoCacheFs, diskUsage: () => Promise.reject(new Error("statfs: EIO")) },
    });
    const dir = await keeper.use("vllm", shard(C1).launch);
    assertOk((await Deno.stat(dir)).isDirectory);
    assertOk(
      lines.some((l) => l.includes("cannot sweep the engine cache") && l.includes("statfs: EIO")),
      lines.join("\n"),
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("tree bytes: allocated blocks of files and folders, links not followed", async () => {
  const root = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${root}/t/a/b`, { recursive: true });
    await Deno.writeFile(`${root}/t/a/b/f`, new Uint8Array(10_000));
    await Deno.writeFile(`${root}/big`, new Uint8Array(1_000_000));
    await Deno.symlink(`${root}/big`, `${root}/t/link`);
    const n = await treeBytes(`${root}/t`);
    assertOk(n >= 10_000 && n < 1_000_000, String(n));
    assertEquals(await treeBytes(`${root}/absent`), 0);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
