import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { until } from "../../tests/until.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { launch } from "../../tests/fake_engine_harness.ts";
import type { DesiredShard } from "../../protocol/agent_protocol.ts";
import type { DesiredLaunch } from "../../engines/types.ts";
import { createLogger } from "../../log/log.ts";
import { compileCacheDir, compileCacheKeyInput } from "../../engines/compile_cache.ts";
import { type CacheFs, denoCacheFs, type DirEntry } from "../model_cache/cache_fs.ts";
import { type EngineCacheEvicted, EngineCacheKeeper } from "./engine_cache_keeper.ts";
import { formatRecord, parseRecord, RECORD_FILE } from "./engine_cache_record.ts";
import { type TreeBytes, treeBytes } from "./tree_bytes.ts";

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

/** What a walk that got through finds. */
const whole = (bytes: number) => Promise.resolve({ bytes, complete: true });

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** Keepers a test made: closed (their queued sweeps done) before its root goes. */
const open: EngineCacheKeeper[] = [];

async function cleanUp(root: string): Promise<void> {
  for (const k of open.splice(0)) await k.close();
  await Deno.remove(root, { recursive: true });
}

/** Options of a test keeper beyond its root. */
interface HarnessOptions {
  held?: Set<string>;
  /** Bytes under a directory (default: the real walk). */
  bytes?: (dir: string, stopAtMs: number, signal?: AbortSignal) => Promise<TreeBytes>;
  removeTree?: (dir: string) => Promise<void>;
  writeTextAtomic?: CacheFs["writeTextAtomic"];
  marks?: { highPercent: number; lowPercent: number };
  removalWaitMs?: number;
}

function harness(root: string, o: HarnessOptions = {}) {
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
    marks: o.marks ?? { highPercent: 90, lowPercent: 89.999 },
    clock,
    log: createLogger("agent", (l) => lines.push(l)),
    onEvicted: (e) => events.push(e),
    fs: {
      ...denoCacheFs,
      writeTextAtomic: o.writeTextAtomic ?? denoCacheFs.writeTextAtomic,
      diskUsage: () => Promise.resolve({ totalBytes: total, freeBytes: total - disk.usedBytes }),
      // What a removal frees leaves the disk's usage, as on a real one.
      removeTree: async (dir) => {
        const freed = (await treeBytes(dir)).bytes;
        await (o.removeTree ?? denoCacheFs.removeTree)(dir);
        disk.usedBytes -= freed;
      },
    },
    bytes: o.bytes,
    removalWaitMs: o.removalWaitMs,
  });
  open.push(keeper);
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
    await cleanUp(root);
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
    await cleanUp(root);
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
      // Under the high watermark for these: each start queues a sweep too.
      dirs.push(await h.keeper.use(s.engine, s.launch));
      await compile(dirs.at(-1)!);
      h.clock.advance(60_000);
    }
    // Their sweeps are done, under the watermark.
    assertEquals(await h.keeper.sweep(), []);
    // The oldest runs; the next start finds the disk over the high watermark.
    h.inUse.push(oldest);
    h.disk.usedBytes = 900_500;
    const started = await h.keeper.use("vllm", shard(C2).launch);
    await h.keeper.sweep();
    assertEquals(await exists(dirs[0]), true, "in use: kept");
    assertEquals(await exists(dirs[1]), false, "least recently used, unused: evicted");
    assertEquals(await exists(dirs[2]), true, "enough was freed");
    assertEquals(await exists(started), true, "the starting one: kept");
    assertEquals(h.events.map((e) => e.cause), ["disk_pressure"]);
    assertOk(h.events[0].reason.includes("over the high watermark of 90%"), h.events[0].reason);
  } finally {
    await cleanUp(root);
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
    // Just over the high watermark: one directory is enough.
    h.disk.usedBytes = 900_100;
    const evicted = await h.keeper.sweep();
    assertEquals(evicted.map((e) => e.entry.dir), [legacy(shard(C1, 2))]);
    assertEquals(evicted[0].entry.key, null);
    assertEquals(await exists(legacy(running)), true);
    assertEquals(h.events.map((e) => [e.engine, e.model]), [["vllm", null]]);
  } finally {
    await cleanUp(root);
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
    open.push(keeper);
    const dir = await keeper.use("vllm", shard(C1).launch);
    await keeper.close();
    assertOk((await Deno.stat(dir)).isDirectory);
    assertOk(
      lines.some((l) => l.includes("cannot sweep the engine cache") && l.includes("statfs: EIO")),
      lines.join("\n"),
    );
  } finally {
    await cleanUp(root);
  }
});

Deno.test("close waits for a sweep, but not for ever: one stuck on its file system is left running, and logged", async () => {
  const lines: string[] = [];
  const reached = Promise.withResolvers<void>();
  const hung = Promise.withResolvers<DirEntry[]>();
  // A dead NFS mount under the state dir: the sweep's first call never returns.
  const keeper = new EngineCacheKeeper({
    root: "/state/engine_cache",
    inUse: () => [],
    installed: () => null,
    marks: { highPercent: 90, lowPercent: 80 },
    clock: new FakeClock(),
    log: createLogger("agent", (l) => lines.push(l)),
    fs: { ...denoCacheFs, readDir: () => (reached.resolve(), hung.promise) },
  });
  const sweep = keeper.sweep();
  await reached.promise;
  await keeper.close(50);
  const said = lines.filter((l) => l.includes("engine cache sweep still running at stop"));
  assertEquals(said.length, 1, lines.join("\n"));
  assertStringIncludes(said[0], "/state/engine_cache");
  // The call returning at last, the sweep ends at its next step.
  hung.resolve([]);
  assertEquals(await sweep, []);
  assertEquals(await keeper.sweep(), [], "a closed keeper sweeps no more");
});

/** A directory an earlier start of `s` left, with its record and compiled bytes, used at `at`. */
async function leftBehind(
  root: string,
  s: DesiredShard<DesiredLaunch>,
  at: number,
): Promise<string> {
  const key = compileCacheKeyInput(s.engine, s.launch);
  const dir = compileCacheDir(root, key);
  await compile(dir);
  await Deno.writeTextFile(`${dir}/${RECORD_FILE}`, formatRecord({ key, last_used_ms: at }));
  return dir;
}

Deno.test("a start never waits for a sweep: the directory is handed out while a walk is stuck", async () => {
  const root = await Deno.makeTempDir();
  const stuck = Promise.withResolvers<void>();
  // Its revision left the model cache: the sweep the start queues walks it, and the walk hangs.
  const h = harness(root, {
    held: new Set([`org/fake-model-8b@${C1}`]),
    bytes: async (dir) => {
      await stuck.promise;
      return treeBytes(dir);
    },
  });
  try {
    const gone = await leftBehind(root, shard(C2), 0);
    let handed: string | null = null;
    const using = h.keeper.use("vllm", shard(C1).launch).then((d) => handed = d);
    try {
      await until("use() hands the directory out", () => handed, { timeoutMs: 5_000 });
    } finally {
      stuck.resolve();
      await using;
    }
    assertOk((await Deno.stat(handed!)).isDirectory);
    // The queued sweep then evicts what it found.
    await h.keeper.sweep();
    assertEquals(await exists(gone), false);
    assertEquals(h.events.map((e) => [e.revision, e.cause]), [[C2, "revision_evicted"]]);
  } finally {
    await cleanUp(root);
  }
});

Deno.test("only candidates are walked: under the high watermark, a revision's own directories", async () => {
  const root = await Deno.makeTempDir();
  try {
    const walked: string[] = [];
    const h = harness(root, {
      held: new Set([`org/fake-model-8b@${C1}`]),
      bytes: (dir) => {
        walked.push(dir);
        return treeBytes(dir);
      },
    });
    const kept = [await leftBehind(root, shard(C1, 1), 1), await leftBehind(root, shard(C1, 2), 2)];
    const gone = await leftBehind(root, shard(C2), 3);
    const evicted = await h.keeper.sweep();
    assertEquals(evicted.map((e) => e.entry.dir), [gone]);
    assertEquals(walked, [gone], "the held revisions' directories are not walked");
    for (const d of kept) assertEquals(await exists(d), true);
  } finally {
    await cleanUp(root);
  }
});

Deno.test("over the high watermark: directories are walked least recently used first, only until enough is found", async () => {
  const root = await Deno.makeTempDir();
  try {
    const walked: string[] = [];
    const h = harness(root, {
      marks: { highPercent: 90, lowPercent: 80 },
      bytes: (dir) => {
        walked.push(dir);
        return whole(60_000);
      },
    });
    const dirs = [];
    for (let tp = 1; tp <= 4; tp++) dirs.push(await leftBehind(root, shard(C1, tp), 100 * tp));
    // 910 000 of 1 000 000 used: 110 000 to free down to the low watermark, two directories.
    h.disk.usedBytes = 910_000;
    const evicted = await h.keeper.sweep();
    assertEquals(evicted.map((e) => e.entry.dir), dirs.slice(0, 2));
    assertEquals(walked, dirs.slice(0, 2), "the two most recent are never walked");
  } finally {
    await cleanUp(root);
  }
});

Deno.test("pressure the engine caches cannot relieve: nothing is evicted, and it is said once", async () => {
  const root = await Deno.makeTempDir();
  try {
    let walks = 0;
    const h = harness(root, {
      marks: { highPercent: 90, lowPercent: 80 },
      bytes: () => {
        walks++;
        return whole(10_000);
      },
    });
    const dirs = [];
    for (let tp = 1; tp <= 3; tp++) dirs.push(await leftBehind(root, shard(C1, tp), tp));
    // 990 000 used: all three together free 30 000, still over the high watermark of 900 000.
    h.disk.usedBytes = 990_000;
    assertEquals(await h.keeper.sweep(), []);
    assertEquals(await h.keeper.sweep(), [], "the next start does not wipe them either");
    assertEquals(walks, 3, "each walked once: their sizes are remembered");
    for (const d of dirs) assertEquals(await exists(d), true);
    const said = h.lines.filter((l) => l.includes("engine caches cannot relieve"));
    assertEquals(said.length, 1, h.lines.join("\n"));
    assertStringIncludes(said[0], root);
    // Once the disk is under the high watermark, a later pressure is said again.
    h.disk.usedBytes = 100_000;
    await h.keeper.sweep();
    h.disk.usedBytes = 990_000;
    await h.keeper.sweep();
    assertEquals(h.lines.filter((l) => l.includes("engine caches cannot relieve")).length, 2);
  } finally {
    await cleanUp(root);
  }
});

Deno.test("a start of a directory a sweep is removing gets it back, made and recorded", async () => {
  const root = await Deno.makeTempDir();
  try {
    const removing = Promise.withResolvers<void>();
    const proceed = Promise.withResolvers<void>();
    const held = new Set([`org/fake-model-8b@${C1}`]);
    const h = harness(root, {
      held,
      removeTree: async (dir) => {
        removing.resolve();
        await proceed.promise;
        await denoCacheFs.removeTree(dir);
      },
    });
    const s = shard(C2);
    const dir = await leftBehind(root, s, 0);
    const sweeping = h.keeper.sweep();
    await removing.promise;
    // The revision is back (downloaded again) and a shard of it starts, mid-removal.
    held.add(`org/fake-model-8b@${C2}`);
    h.inUse.push(s);
    const using = h.keeper.use("vllm", s.launch);
    proceed.resolve();
    assertEquals(await using, dir);
    await sweeping;
    await h.keeper.sweep();
    assertEquals((await Deno.stat(dir)).mode! & 0o777, 0o700);
    assertEquals(parseRecord(await Deno.readTextFile(`${dir}/${RECORD_FILE}`))?.key.revision, C2);
  } finally {
    await cleanUp(root);
  }
});

Deno.test("a start waits for its directory's removal at most its bound, then compiles into a fresh one, guarded while it runs", async () => {
  const root = await Deno.makeTempDir();
  let bound: ReturnType<typeof setTimeout> | undefined;
  const hung = Promise.withResolvers<void>();
  try {
    const removing = Promise.withResolvers<void>();
    const held = new Set([`org/fake-model-8b@${C1}`]);
    const h = harness(root, {
      held,
      removalWaitMs: 50,
      // A removal that does not end (a dead NFS mount, a huge tree on a stalled disk).
      removeTree: async (dir) => {
        removing.resolve();
        await hung.promise;
        await denoCacheFs.removeTree(dir);
      },
    });
    const s = shard(C2);
    const dir = await leftBehind(root, s, 0);
    const sweeping = h.keeper.sweep();
    await removing.promise;
    h.inUse.push(s);
    // Bounded here too, so that a start waiting for ever fails the test rather than hanging it.
    const late = new Promise<"hung">((r) => bound = setTimeout(() => r("hung"), 10_000));
    const got = await Promise.race([h.keeper.use("vllm", s.launch), late]);
    assertOk(got !== "hung", "the start waited for the removal past its bound");
    assertOk(got.startsWith(`${dir}.fresh-`), got);
    assertEquals((await Deno.stat(got)).mode! & 0o777, 0o700);
    assertEquals(parseRecord(await Deno.readTextFile(`${got}/${RECORD_FILE}`))?.key.revision, C2);
    const said = h.lines.filter((l) => l.includes("still being removed"));
    assertEquals(said.length, 1, h.lines.join("\n"));
    assertStringIncludes(said[0], got);
    hung.resolve();
    await sweeping;
    assertEquals(await exists(dir), false, "the removal went on");
    // Its revision gone from the model cache: kept while its shard runs, then evicted.
    assertEquals(await h.keeper.sweep(), []);
    assertOk(await exists(got));
    h.inUse.pop();
    assertEquals((await h.keeper.sweep()).map((ev) => ev.entry.dir), [got]);
  } finally {
    clearTimeout(bound);
    hung.resolve();
    await cleanUp(root);
  }
});

Deno.test("a walk cut short under pressure: not said to be from elsewhere, walked again, its bytes 'at least'", async () => {
  const root = await Deno.makeTempDir();
  try {
    const walks: string[] = [];
    let oldestWalks = 0;
    let freedByOldest = 0;
    const dirs: string[] = [];
    const h = harness(root, {
      marks: { highPercent: 90, lowPercent: 80 },
      bytes: (dir) => {
        walks.push(dir);
        if (dir !== dirs[0]) return whole(10_000);
        // A big Inductor cache: its walks run out of time, the second (warm) one gets further.
        return Promise.resolve({ bytes: ++oldestWalks === 1 ? 10_000 : 100_000, complete: false });
      },
      removeTree: async (dir) => {
        await denoCacheFs.removeTree(dir);
        if (dir === dirs[0]) h.disk.usedBytes -= freedByOldest;
      },
    });
    for (let tp = 1; tp <= 3; tp++) dirs.push(await leftBehind(root, shard(C1, tp), tp));
    // 990 000 used: 90 000 to free to the high watermark, 190 000 to the low one.
    h.disk.usedBytes = 990_000;
    assertEquals(await h.keeper.sweep(), []);
    assertEquals(h.lines.filter((l) => l.includes("cannot relieve")), [], h.lines.join("\n"));
    assertEquals(h.lines.filter((l) => l.includes("could not all be sized")).length, 1);
    assertEquals(walks, dirs);

    // Its true size is far more than either walk saw: once it is gone, the disk is under the low watermark.
    freedByOldest = 300_000;
    const evicted = await h.keeper.sweep();
    assertEquals(walks, [...dirs, dirs[0]], "only the one cut short is walked again");
    assertEquals(
      evicted.map((e) => e.entry.dir),
      [dirs[0]],
      "the next one is spared: the disk is read again",
    );
    assertEquals(h.events.map((e) => [e.bytes, e.atLeast]), [[100_000, true]]);
    assertStringIncludes(h.lines.find((l) => l.includes("engine cache evicted"))!, "at_least");
  } finally {
    await cleanUp(root);
  }
});

Deno.test("close stops a sweep at its next step: the walk under way is told, no other directory is walked", async () => {
  const root = await Deno.makeTempDir();
  try {
    const walked: string[] = [];
    const signals: (AbortSignal | undefined)[] = [];
    const reached = Promise.withResolvers<void>();
    const release = Promise.withResolvers<void>();
    // Every directory's revision left the model cache: the sweep walks each before removing it.
    const h = harness(root, {
      held: new Set(),
      bytes: async (dir, _stopAtMs, signal) => {
        walked.push(dir);
        signals.push(signal);
        reached.resolve();
        await release.promise;
        return treeBytes(dir);
      },
    });
    const dirs = [];
    for (let tp = 1; tp <= 3; tp++) dirs.push(await leftBehind(root, shard(C2, tp), tp));
    const sweeping = h.keeper.sweep();
    await reached.promise;
    const closing = h.keeper.close();
    assertEquals(signals[0]?.aborted, true, "the walk under way is told to stop");
    release.resolve();
    await closing;
    assertEquals(await sweeping, []);
    assertEquals(walked.length, 1, walked.join("\n"));
    for (const d of dirs) assertEquals(await exists(d), true);
  } finally {
    await cleanUp(root);
  }
});

Deno.test("two starts of one key: the first to finish leaves the other's directory guarded", async () => {
  const root = await Deno.makeTempDir();
  try {
    const blocked = Promise.withResolvers<void>();
    const writing = Promise.withResolvers<void>();
    let writes = 0;
    // No revision is held: a sweep would evict the directory were it not being handed out.
    const h = harness(root, {
      held: new Set(),
      writeTextAtomic: async (path, text) => {
        if (++writes === 2) {
          writing.resolve();
          await blocked.promise;
        }
        await denoCacheFs.writeTextAtomic(path, text);
      },
    });
    // Two replicas of one deployment on this host: one key, one directory.
    const s = shard(C2);
    const first = h.keeper.use("vllm", s.launch);
    const second = h.keeper.use("vllm", s.launch);
    await writing.promise;
    // Whichever start the file system answered first has recorded its use; the other is still
    // recording (blocked): a sweep now must leave the directory.
    const dir = await Promise.race([first, second]);
    assertEquals(await h.keeper.sweep(), []);
    blocked.resolve();
    assertEquals([await first, await second], [dir, dir]);
    assertEquals(await exists(`${dir}/${RECORD_FILE}`), true);
  } finally {
    await cleanUp(root);
  }
});
