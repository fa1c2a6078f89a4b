/**
 * Resume after a real crash: a process fetching a model from the fake hub
 * (rate-capped, so it is midway for a while) is SIGKILLed once some chunks
 * are recorded; a new cache over the same directory fetches only the chunks
 * the records do not name, and every file verifies.
 */
import { startFakeHub } from "../../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../../dev/fake_hub/synthetic_model.ts";
import type { ByteSource } from "../../models/byte_source.ts";
import { expectedHash } from "../../models/file_hash.ts";
import { HubClient } from "../../models/hub_client.ts";
import { assertEquals, assertOk } from "../../tests/assert.ts";
import { testCache, withTempDir } from "../../tests/model_cache_fixture.ts";
import { until } from "../../tests/until.ts";
import { parseRecord } from "./chunk_record.ts";

const CHUNK = 256 * 1024;
const CHILD = new URL("../../tests/model_cache_child.ts", import.meta.url).pathname;

Deno.test("SIGKILL midway, then a new process: only unrecorded chunks are fetched again", async () => {
  const model = await syntheticModel({ repo: "acme/crash", shards: 2, weightBytes: 8 * 2 ** 20 });
  // 4 MiB/s: the child is midway for about two seconds.
  const hub = startFakeHub({ repos: [model], bytesPerSecond: 4 * 2 ** 20 });
  let child: Deno.ChildProcess | null = null;
  try {
    await withTempDir(async (root) => {
      const client = new HubClient({ config: { endpoint: hub.endpoint } });
      const snapshot = await client.resolveRevision("acme/crash", "main");
      const shards = snapshot.files.filter((f) => f.sha256 !== undefined);
      const records = shards.map((f) =>
        `${root}/models--acme--crash/blobs/${f.sha256}.llmgw.chunks`
      );
      const recorded = async () => {
        const sets = await Promise.all(records.map(async (path, i) => {
          const text = await Deno.readTextFile(path).catch(() => null);
          return parseRecord(text, shards[i].size, CHUNK) ?? new Set<number>();
        }));
        return sets;
      };
      child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", CHILD, root, hub.endpoint, "acme/crash", String(CHUNK)],
        stdout: "null",
        stderr: "piped",
      }).spawn();
      await until("the child to record 4 chunks", async () => {
        const n = (await recorded()).reduce((sum, s) => sum + s.size, 0);
        return n >= 4;
      }, { timeoutMs: 60_000 });
      child.kill("SIGKILL");
      await child.status;
      child = null;
      const before = await recorded();
      const total = shards.reduce((n, f) => n + Math.ceil(f.size / CHUNK), 0);
      const recordedCount = before.reduce((n, s) => n + s.size, 0);
      assertOk(recordedCount >= 4 && recordedCount < total, `${recordedCount} of ${total}`);
      // A new process over the same directory.
      const origin = client.byteSource();
      const reads: { file: string; start: number }[] = [];
      const counting: ByteSource = {
        kind: origin.kind,
        name: origin.name,
        read(repo, commit, file, start, end, signal) {
          reads.push({ file: file.path, start });
          return origin.read(repo, commit, file, start, end, signal);
        },
      };
      const { cache, events } = testCache(root, { chunkBytes: CHUNK, concurrency: 4 });
      await cache.ensureSnapshot(snapshot, [counting], { revision: "main" });
      shards.forEach((f, i) => {
        for (const index of before[i]) {
          assertEquals(
            reads.some((r) => r.file === f.path && r.start === index * CHUNK),
            false,
            `${f.path} chunk ${index} was recorded before the kill, yet fetched again`,
          );
        }
      });
      assertEquals(events.filter((e) => e.kind === "mismatch"), [], "what was recorded was right");
      for (const file of snapshot.files) {
        const { hash, want } = expectedHash(file);
        const f = await Deno.open(
          `${root}/models--acme--crash/snapshots/${snapshot.commit}/${file.path}`,
        );
        for await (const piece of f.readable) hash.update(piece);
        assertEquals(hash.hex(), want, file.path);
      }
    });
  } finally {
    if (child !== null) {
      const c = child as Deno.ChildProcess;
      try {
        c.kill("SIGKILL");
      } catch {
        // already gone
      }
      await c.status;
    }
    await hub.stop();
  }
});
