/**
 * The written view of chunks under way (written_chunks.ts), pure: a reader
 * is never told of bytes past what the writer wrote, gets all of them once
 * the chunk is complete, and errors once the try is abandoned; the view
 * forgets tries that ended.
 */
import { assertEquals, assertOk, assertRejects, assertThrows } from "../../tests/assert.ts";
import { ChunkAbandonedError, WrittenChunks } from "./written_chunks.ts";

const PART = "/cache/models--acme--tiny/blobs/k.llmgw.incomplete";

/** A promise's outcome so far, without waiting for it. */
function watch<T>(p: Promise<T>): { value?: T; error?: unknown; settled: boolean } {
  const out: { value?: T; error?: unknown; settled: boolean } = { settled: false };
  p.then((v) => Object.assign(out, { value: v, settled: true }))
    .catch((e) => Object.assign(out, { error: e, settled: true }));
  return out;
}

/** Lets every settled promise's callbacks run. */
const flush = () => new Promise((r) => setTimeout(r, 0));

Deno.test("written chunks: a reader waits for its bytes and is never told of more than was written", async () => {
  const view = new WrittenChunks();
  const t = view.begin(PART, 1000, 2000, 1000);
  const cases: { want: number; advances: number[]; got: number | null }[] = [
    // Already written: at once, with what is written (not only what was asked).
    { want: 1000, advances: [], got: 1000 },
    // Waits through advances below its want, then gets the writer's offset.
    { want: 1300, advances: [1100, 1250, 1400], got: 1400 },
    { want: 1400, advances: [], got: 1400 },
    // Past the chunk's end: waits for the end only.
    { want: 5000, advances: [1999, 2000], got: 2000 },
  ];
  for (const c of cases) {
    const r = watch(t.reach(c.want));
    for (const to of c.advances) {
      await flush();
      assertEquals(r.settled, false, `want ${c.want}: told before ${to} was written`);
      t.advance(to);
    }
    await flush();
    assertEquals(r.value, c.got, `want ${c.want}`);
    assertEquals(t.waiting, 0);
  }
  assertThrows(() => t.advance(1500), RangeError, "from 2000 to 1500");
  t.complete();
  assertEquals([t.state, view.writing(PART).size], ["complete", 0]);
  assertEquals(await t.reach(2000), 2000);
});

Deno.test("written chunks: property — random writes and readers, no reader ever ahead of the writer", async () => {
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let round = 0; round < 50; round++) {
    const view = new WrittenChunks();
    const start = Math.floor(random() * 10_000);
    const end = start + 1 + Math.floor(random() * 5_000);
    const t = view.begin(PART, start, end, start);
    const readers: { want: number; out: ReturnType<typeof watch<number>> }[] = [];
    const told: [number, number][] = [];
    for (let step = 0; step < 40 && t.written < end; step++) {
      for (let i = 0; i < 3; i++) {
        const want = start + Math.floor(random() * (end - start + 100));
        const p = t.reach(want);
        readers.push({ want, out: watch(p) });
        // What it was told, beside what was written when it heard it.
        p.then((n) => told.push([n, t.written]), () => {});
      }
      t.advance(Math.min(end, t.written + Math.floor(random() * (end - start) / 8)));
      await flush();
      for (const r of readers) {
        if (!r.out.settled) continue;
        // Told at most what was written, and at least what it asked (or the end).
        assertOk(r.out.value! <= t.written, `told ${r.out.value} of ${t.written}`);
        assertOk(r.out.value! >= Math.min(r.want, end), `told ${r.out.value} < want ${r.want}`);
      }
    }
    for (const [n, written] of told) assertOk(n <= written);
    const finish = random() < 0.5;
    if (finish) {
      t.advance(end);
      t.complete();
    } else {
      t.abandon("the source broke");
    }
    await flush();
    for (const r of readers) {
      assertOk(r.out.settled, "every reader settles when the try ends");
      if (finish) assertOk(r.out.value! <= end && r.out.value! >= Math.min(r.want, end));
      // Abandoned: those still waiting error; none is told of bytes it had not been told of.
      else if (r.out.error !== undefined) assertOk(r.out.error instanceof ChunkAbandonedError);
    }
    assertEquals(t.waiting, 0);
    assertEquals(view.writing(PART).size, 0);
  }
});

Deno.test("written chunks: an abandoned try errors its readers, now and later, even below what was written", async () => {
  const view = new WrittenChunks();
  const t = view.begin(PART, 0, 100, 0);
  t.advance(40);
  const waiting = watch(t.reach(80));
  await flush();
  t.abandon("peer a sent nothing for 60 s");
  await flush();
  assertOk(waiting.error instanceof ChunkAbandonedError);
  assertEquals(
    (waiting.error as Error).message,
    "the download of bytes 0-99 here stopped at byte 40: peer a sent nothing for 60 s",
  );
  // Bytes below 40 were written, but a stream of this try does not go on over them.
  await assertRejects(() => t.reach(10), ChunkAbandonedError);
  // The writer of an ended try advancing is nothing (a newer try may have abandoned it under
  // its writer); a bad offset still throws.
  t.advance(50);
  assertEquals([t.state, t.written], ["abandoned", 40]);
  await assertRejects(() => t.reach(10), ChunkAbandonedError);
  assertThrows(() => t.advance(30), RangeError, "from 40 to 30");
  assertThrows(() => t.advance(101), RangeError, "from 40 to 101");
  // Abandon after complete is nothing (the writer's finally always abandons).
  const u = view.begin(PART, 100, 200, 100);
  u.advance(200);
  u.complete();
  u.abandon("the download stopped");
  assertEquals([u.state, await u.reach(200)], ["complete", 200]);
  assertThrows(() => view.begin(PART, 0, 10, 11), RangeError, "outside the chunk");
  assertThrows(() => view.begin(PART, 200, 300, 250).complete(), RangeError, "written up to 250");
});

Deno.test("written chunks: the next try of a chunk keeps what was written; a stale try is abandoned", async () => {
  const view = new WrittenChunks();
  const first = view.begin(PART, 0, 100, 0);
  first.advance(30);
  const old = watch(first.reach(90));
  // A second begin of the same chunk (its try did not end first) replaces it.
  const second = view.begin(PART, 0, 100, 30);
  await flush();
  assertOk(old.error instanceof ChunkAbandonedError);
  assertEquals([...view.writing(PART).values()], [second]);
  assertEquals(await second.reach(20), 30);
  // The stale try's writer advancing changes nothing, and throws nothing.
  first.advance(60);
  assertEquals([first.written, second.written, second.state], [30, 30, "writing"]);
  // The first try's end does not remove the second from the view.
  first.abandon("late");
  assertEquals(view.writing(PART).get(0), second);
  const other = view.begin("/elsewhere.llmgw.incomplete", 0, 10, 0);
  assertEquals(view.writing(PART).size, 1);
  other.abandon("stopped");
  assertEquals(view.writing("/elsewhere.llmgw.incomplete").size, 0);
});

Deno.test("written chunks: a reader whose follower went away stops waiting", async () => {
  const view = new WrittenChunks();
  const t = view.begin(PART, 0, 100, 0);
  const gone = new AbortController();
  const r = watch(t.reach(50, gone.signal));
  await flush();
  assertEquals(t.waiting, 1);
  gone.abort(new Error("follower closed"));
  await flush();
  assertEquals([(r.error as Error).message, t.waiting], ["follower closed", 0]);
  await assertRejects(() => t.reach(50, gone.signal), Error, "follower closed");
});

Deno.test("written chunks: a reader of an ended try gets the chunk's next try, now or when it begins", async () => {
  const view = new WrittenChunks();
  const first = view.begin(PART, 0, 100, 0);
  first.advance(40);
  first.abandon("hub reset the connection");
  const never = new AbortController().signal;
  const next = watch(view.nextTry(PART, first, never));
  // Another chunk's or file's try is not it.
  view.begin(PART, 100, 200, 100);
  view.begin("/elsewhere.llmgw.incomplete", 0, 100, 0);
  await flush();
  assertOk(!next.settled);
  const second = view.begin(PART, 0, 100, 40);
  await flush();
  assertEquals([next.value === second, second.written], [true, 40]);
  // Begun already (a newer begin abandoned the old try): that one, at once.
  const third = view.begin(PART, 0, 100, 40);
  assertEquals(await view.nextTry(PART, second, never), third);
  // The reader gives up: its reason, and it is not woken later.
  third.abandon("stalled");
  const gone = new AbortController();
  const given = watch(view.nextTry(PART, third, gone.signal));
  gone.abort(new Error("follower closed"));
  await flush();
  assertEquals((given.error as Error).message, "follower closed");
  const fourth = view.begin(PART, 0, 100, 40);
  assertEquals([given.value, await view.nextTry(PART, third, never)], [undefined, fourth]);
});
