import { assertEquals, assertRejects } from "../tests/assert.ts";
import { byteSlice } from "./byte_slice.ts";

function chunks(...parts: number[][]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (const p of parts) c.enqueue(new Uint8Array(p));
      c.close();
    },
  });
}

const all = async (
  s: ReadableStream<Uint8Array>,
) => [...new Uint8Array(await new Response(s).arrayBuffer())];
const short = (n: number) => new Error(`short after ${n}`);

Deno.test("byteSlice skips, cuts and stops at exactly the length asked", async () => {
  assertEquals(await all(byteSlice(chunks([0, 1, 2], [3, 4, 5, 6]), 2, 3, short)), [2, 3, 4]);
  assertEquals(await all(byteSlice(chunks([0, 1], [], [2, 3]), 0, 4, short)), [0, 1, 2, 3]);
  let cancelled = false;
  const endless = new ReadableStream<Uint8Array>({
    pull: (c) => c.enqueue(new Uint8Array([9, 9])),
    cancel: () => {
      cancelled = true;
    },
  });
  assertEquals(await all(byteSlice(endless, 1, 5, short)), [9, 9, 9, 9, 9]);
  assertEquals(cancelled, true);
});

Deno.test("byteSlice errors when the source ends short or breaks", async () => {
  await assertRejects(() => all(byteSlice(chunks([1, 2]), 0, 3, short)), Error, "short after 2");
  await assertRejects(() => all(byteSlice(chunks([1, 2]), 1, 2, short)), Error, "short after 1");
  const broken = new ReadableStream<Uint8Array>({ pull: (c) => c.error(new Error("reset")) });
  await assertRejects(
    () => all(byteSlice(broken, 0, 3, short, (e) => new RangeError(`broke: ${e}`))),
    RangeError,
    "broke: Error: reset",
  );
});
