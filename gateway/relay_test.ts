import { assertEquals } from "../tests/assert.ts";
import type { BodyReader } from "../http/read_limited.ts";
import { relayBody, type RelayEnd, sseErrorEvent } from "./relay.ts";
import { TailBuffer } from "./usage.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A source yielding `chunks`, then failing with `failure` if given, else ending. */
function source(chunks: string[], failure?: Error): BodyReader {
  let i = 0;
  return {
    read() {
      if (i < chunks.length) {
        return Promise.resolve({ done: false, value: enc.encode(chunks[i++]) });
      }
      if (failure) return Promise.reject(failure);
      return Promise.resolve({ done: true, value: undefined });
    },
    cancel: () => Promise.resolve(),
  };
}

async function collect(stream: ReadableStream<Uint8Array>): Promise<string[]> {
  const out: string[] = [];
  for await (const chunk of stream) out.push(dec.decode(chunk));
  return out;
}

Deno.test("relayBody: onChunk sees every chunk, unchanged, and a tail finds the usage", async () => {
  const events = [
    'data: {"choices":[{"delta":{"content":"a"}}]}\n\n',
    'data: {"choices":[],"usage":{"prompt_',
    'tokens":4,"completion_tokens":1}}\n\ndata: [DONE]\n\n',
  ];
  const tail = new TailBuffer();
  const seen: string[] = [];
  const ends: RelayEnd[] = [];
  const body = relayBody(source(events), {
    sse: true,
    onEnd: (end) => ends.push(end),
    onChunk: (chunk) => {
      seen.push(dec.decode(chunk));
      tail.push(chunk);
    },
  });
  assertEquals(await collect(body), events);
  assertEquals(seen, events);
  assertEquals(ends, ["done"]);
  assertEquals(tail.usage(), { prompt: 4, completion: 1 });
});

const failed = sseErrorEvent("upstream stream failed: engine died");

for (
  const [name, chunks, blank] of [
    ["after a whole event: no blank line", ["data: 1\n\n"], false],
    ["mid-event: a blank line first", ["data: 1\n\ndata: 2"], true],
    ["mid-event, one byte at a time: a blank line first", ["data: 1\n", "\n", "d"], true],
    ["one byte ending the event: no blank line", ["data: 1\n", "\n"], false],
    ["before any byte: no blank line", [], false],
  ] as const
) {
  Deno.test(`relayBody: an SSE upstream failing ${name}`, async () => {
    const ends: RelayEnd[] = [];
    const body = relayBody(source([...chunks], new Error("engine died")), {
      sse: true,
      onEnd: (end) => ends.push(end),
    });
    const out = await collect(body);
    assertEquals(out, [...chunks, ...(blank ? ["\n\n"] : []), dec.decode(failed)]);
    assertEquals(ends, ["error"]);
  });
}
