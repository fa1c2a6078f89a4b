import { assertEquals, assertRejects } from "../tests/assert.ts";
import { byteSlice, PIECE_BYTES } from "./byte_slice.ts";

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

/** A byte stream (as a fetch body is) of `pieces` pieces of `size` bytes, each byte its index mod 251. */
function byteStream(pieces: number, size: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    type: "bytes",
    pull(c) {
      if (sent === pieces) {
        // A byte stream ends a pending BYOB read this way (as fetch bodies do).
        c.close();
        return c.byobRequest?.respond(0);
      }
      const piece = new Uint8Array(size);
      for (let i = 0; i < size; i++) piece[i] = (sent * size + i) % 251;
      sent++;
      c.enqueue(piece);
    },
  });
}

async function pieces(s: ReadableStream<Uint8Array>): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  for await (const p of s) out.push(p);
  return out;
}

Deno.test("byteSlice hands on pieces of PIECE_BYTES (256 KiB), not the 16 KiB records a TLS body comes in", async () => {
  const record = 16 * 1024;
  // 200 records of 16 KiB from byte 1000: whole pieces, then the rest, every byte in place.
  const length = 200 * record - 1000;
  const got = await pieces(byteSlice(byteStream(200, record), 1000, length, short));
  const whole = Math.floor(length / PIECE_BYTES);
  assertEquals(got.map((p) => p.byteLength), [
    ...Array(whole).fill(PIECE_BYTES),
    length - whole * PIECE_BYTES,
  ]);
  const all = new Uint8Array(length);
  let at = 0;
  for (const p of got) {
    all.set(p, at);
    at += p.byteLength;
  }
  assertEquals(all.every((b, i) => b === (1000 + i) % 251), true);
  // A stream that is not a byte stream is gathered the same way.
  const plain = new ReadableStream<Uint8Array>({
    start(c) {
      for (let i = 0; i < 100; i++) c.enqueue(new Uint8Array(record).fill(i));
      c.close();
    },
  });
  const gathered = await pieces(byteSlice(plain, 0, 100 * record, short));
  const per = PIECE_BYTES / record;
  assertEquals(gathered.length, Math.ceil(100 / per));
  assertEquals(gathered.slice(0, -1).every((p) => p.byteLength === PIECE_BYTES), true);
  assertEquals([gathered[0][0], gathered[1][0], gathered.at(-1)!.at(-1)], [0, per, 99]);
});

Deno.test("byteSlice over a byte stream: a short end yields what came, then errors with its count", async () => {
  const s = byteSlice(byteStream(3, 1000), 0, 5000, short);
  const reader = s.getReader();
  const first = await reader.read();
  assertEquals(first.value?.byteLength, 3000);
  await assertRejects(() => reader.read(), Error, "short after 3000");
});
