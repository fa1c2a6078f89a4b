import { assertEquals } from "../tests/assert.ts";
import { readLimited } from "./read_limited.ts";

function streamOf(parts: string[], onCancel?: () => void): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    pull(c) {
      const next = parts.shift();
      if (next === undefined) c.close();
      else c.enqueue(enc.encode(next));
    },
    cancel: onCancel,
  });
}

Deno.test("readLimited joins the chunks of a body within the limit, up to exactly the limit", async () => {
  const got = await readLimited(streamOf(["ab", "cd", "e"]), 5);
  assertEquals(new TextDecoder().decode(got!), "abcde");
  assertEquals((await readLimited(streamOf([]), 0))?.length, 0);
});

Deno.test("readLimited stops and cancels the stream one byte over the limit", async () => {
  let cancelled = false;
  const parts = ["abc", "def", "never read"];
  assertEquals(await readLimited(streamOf(parts, () => cancelled = true), 5), null);
  assertEquals(cancelled, true);
  assertEquals(parts, ["never read"], "nothing is read after the limit is passed");
});
