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

Deno.test("readLimited reads a BodyReader as it reads a stream, and passes a break-off on", async () => {
  const enc = new TextEncoder();
  const reader = (parts: string[], broken = false) => {
    let cancelled = false;
    return {
      get cancelled() {
        return cancelled;
      },
      read(): Promise<ReadableStreamReadResult<Uint8Array>> {
        const next = parts.shift();
        if (next !== undefined) return Promise.resolve({ done: false, value: enc.encode(next) });
        if (broken) return Promise.reject(new Error("connection reset"));
        return Promise.resolve({ done: true, value: undefined });
      },
      cancel() {
        cancelled = true;
        return Promise.resolve();
      },
    };
  };
  assertEquals(new TextDecoder().decode((await readLimited(reader(["ab", "c"]), 3))!), "abc");
  const long = reader(["abcd", "never read"]);
  assertEquals(await readLimited(long, 3), null);
  assertEquals(long.cancelled, true);
  let failure = "";
  await readLimited(reader(["a"], true), 3).catch((e) => failure = e.message);
  assertEquals(failure, "connection reset");
});
