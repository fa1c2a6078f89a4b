/**
 * A try's bound on a silent source (review of issue #25 follow-up, ops item
 * 2): only waits on the source count, a stall is a retryable error naming
 * the source, and through the cache a source that stalls midway is the
 * source's failure: the chunk goes on from the byte it reached, elsewhere.
 * Timers are fired by hand, never waited for.
 */
import { assertEquals, assertOk, assertRejects } from "../../tests/assert.ts";
import { MemoryByteSource } from "../../tests/memory_byte_source.ts";
import { sampleModel, testCache, withTempDir } from "../../tests/model_cache_fixture.ts";
import { until } from "../../tests/until.ts";
import { DEFAULT_STALL_MS, SourceStalledError, stallLimited } from "./stall_limit.ts";
import type { Sleep } from "./token_bucket.ts";

/** Stall timers that end only when fired by the test (or their signal aborts). */
function manualTimers() {
  const live = new Set<{ ms: number; resolve: () => void }>();
  const sleep: Sleep = (ms, signal) =>
    new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const t = { ms, resolve };
      live.add(t);
      signal?.addEventListener("abort", () => {
        live.delete(t);
        resolve();
      }, { once: true });
    });
  /** Ends every timer still waiting; returns their lengths. */
  const fire = () => {
    const fired = [...live];
    live.clear();
    for (const t of fired) t.resolve();
    return fired.map((t) => t.ms);
  };
  return { sleep, live, fire };
}

/** A stream of `pieces`, then silence until cancelled. */
function stallingStream(pieces: Uint8Array[], cancelled: { reason: unknown }) {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (i < pieces.length) c.enqueue(pieces[i++]);
      return i < pieces.length ? undefined : new Promise(() => {});
    },
    cancel(reason) {
      cancelled.reason = reason ?? "cancelled";
    },
  });
}

Deno.test("stallLimited: pieces pass; silence past the limit is a retryable error; the request is dropped", async () => {
  const timers = manualTimers();
  const cancelled = { reason: undefined as unknown };
  let opened: AbortSignal | null = null;
  const pieces = stallLimited(
    (signal) => {
      opened = signal;
      return Promise.resolve(stallingStream([new Uint8Array(3), new Uint8Array(4)], cancelled));
    },
    { ms: 5_000, sleep: timers.sleep },
    new AbortController().signal,
    () => "peer a sent nothing for 5 s",
  );
  assertEquals((await pieces.next()).value?.length, 3);
  // Between pieces the consumer's time (rate limit, disk) is not the source's: no timer runs.
  assertEquals(timers.live.size, 0);
  assertEquals((await pieces.next()).value?.length, 4);
  const next = pieces.next();
  await Promise.resolve();
  assertEquals(timers.fire(), [5_000]);
  const e = await assertRejects(
    () => next,
    SourceStalledError,
    "peer a sent nothing for 5 s",
  ) as SourceStalledError;
  assertEquals(e.retryable, true);
  assertOk(opened!.aborted, "the request's signal aborts");
  assertOk(cancelled.reason !== undefined, "the stream is cancelled");
});

Deno.test("stallLimited: an answer that never comes is a stall too; a stream that comes late is dropped", async () => {
  const timers = manualTimers();
  const cancelled = { reason: undefined as unknown };
  let answer: (s: ReadableStream<Uint8Array>) => void = () => {};
  const pieces = stallLimited(
    () => new Promise((resolve) => answer = resolve),
    { ms: 60_000, sleep: timers.sleep },
    new AbortController().signal,
    () => "hub sent nothing",
  );
  const next = pieces.next();
  await Promise.resolve();
  assertEquals(timers.fire(), [60_000]);
  await assertRejects(() => next, SourceStalledError, "hub sent nothing");
  answer(stallingStream([], cancelled));
  await Promise.resolve();
  await Promise.resolve();
  assertOk(cancelled.reason !== undefined, "the late stream is cancelled");
});

Deno.test("stallLimited: a stop wins over the stall: the signal's reason, no stall error", async () => {
  const timers = manualTimers();
  const stop = new AbortController();
  const pieces = stallLimited(
    () => Promise.resolve(stallingStream([], { reason: undefined })),
    { ms: 60_000, sleep: timers.sleep },
    stop.signal,
    () => "never said",
  );
  const next = pieces.next();
  stop.abort(new Error("agent stopped"));
  await assertRejects(() => next, Error, "agent stopped");
  assertEquals(timers.live.size, 0);
});

Deno.test("a source that stalls midway fails its try after the stall limit; the chunk goes on elsewhere from the byte reached", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const shard = "model-00001-of-00002.safetensors";
    // Chunk 1024-2048 of the shard: 512 bytes, then silence (a CDN connection gone quiet).
    const peer = new MemoryByteSource("peer a", contents, [
      { kind: "hang", file: shard, offset: 1536, times: 1 },
    ]);
    const hub = new MemoryByteSource("https://hub.example", contents, [], "hub");
    const timers = manualTimers();
    let hung = false;
    peer.onHang = () => hung = true;
    const { cache, events } = testCache(root, { concurrency: 1, stallSleep: timers.sleep });
    const stop = new AbortController();
    const done = cache.ensureSnapshot(snapshot, [peer, hub], { signal: stop.signal });
    try {
      // The stream pulls ahead of the try: wait for the try itself to wait on the silence.
      await until("the try waiting on the silent source", () => hung && timers.live.size > 0, {
        describe: () => `hung: ${hung}`,
      });
      // One try in flight, waiting on the silent source with the default limit.
      assertEquals(timers.fire(), [DEFAULT_STALL_MS]);
      await done;
    } finally {
      stop.abort(new Error("test over"));
      await done.catch(() => {});
    }
    const failed = events.flatMap((e) => e.kind === "chunk_failed" ? [e] : []);
    assertEquals(failed.map((e) => [e.source, e.range, e.error]), [
      ["peer a", "1024-2048", `peer a sent nothing of ${shard} for 60 s, at byte 1536`],
    ]);
    assertOk(hub.reads.some((r) => r.file === shard && r.start === 1536 && r.end === 2048));
    const f = snapshot.files.find((x) => x.path === shard)!;
    const blob = `${root}/models--acme--tiny-llm/blobs/${f.sha256}`;
    assertEquals(await Deno.readFile(blob), contents.get(shard));
  });
});
