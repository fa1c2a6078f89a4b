import fc from "fast-check";
import { assertEquals, assertThrows } from "../tests/assert.ts";
import {
  findUsage,
  STREAM_TAIL_BYTES,
  TailBuffer,
  type TokenUsage,
  usageCounts,
  usageOfWhole,
  WHOLE_TAIL_BYTES,
} from "./usage.ts";

const enc = new TextEncoder();

Deno.test("findUsage: the usage engines report, and nothing from what is not one", () => {
  const sse = (...events: unknown[]) =>
    events.map((e) => `data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`).join("");
  const cases: [string, string, TokenUsage | null][] = [
    [
      "a whole chat completion",
      JSON.stringify({
        id: "chatcmpl-1",
        choices: [{ index: 0, message: { role: "assistant", content: "hi" } }],
        usage: { prompt_tokens: 5, total_tokens: 12, completion_tokens: 7 },
        prompt_logprobs: null,
      }),
      { prompt: 5, completion: 7 },
    ],
    [
      "a Responses API answer",
      JSON.stringify({
        object: "response",
        output: [{ type: "message", content: [{ type: "output_text", text: "x" }] }],
        usage: {
          input_tokens: 3,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens: 4,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: 7,
        },
      }),
      { prompt: 3, completion: 4 },
    ],
    [
      "embeddings: no completion count is 0",
      '{"data":[],"usage":{"prompt_tokens":4,"total_tokens":4}}',
      { prompt: 4, completion: 0 },
    ],
    ["spaces around the key", '{"usage" :\n { "prompt_tokens" : 1, "completion_tokens": 2 } }', {
      prompt: 1,
      completion: 2,
    }],
    [
      "a chat stream's usage chunk before [DONE]",
      sse(
        { choices: [{ delta: { content: "a" } }], usage: null },
        { choices: [{ delta: {}, finish_reason: "stop" }], usage: null },
        { choices: [], usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 } },
        "[DONE]",
      ),
      { prompt: 9, completion: 2 },
    ],
    [
      "continuous usage: the last chunk's totals",
      sse(
        { choices: [], usage: { prompt_tokens: 9, completion_tokens: 1 } },
        { choices: [], usage: { prompt_tokens: 9, completion_tokens: 2 } },
        "[DONE]",
      ),
      { prompt: 9, completion: 2 },
    ],
    [
      "a response.completed event",
      "event: response.created\ndata: " +
      JSON.stringify({ type: "response.created", response: { usage: null } }) +
      "\n\nevent: response.completed\ndata: " +
      JSON.stringify({
        type: "response.completed",
        response: { output: [], usage: { input_tokens: 2, output_tokens: 6 }, user: null },
      }) + "\n\n",
      { prompt: 2, completion: 6 },
    ],
    ["a stream without usage", sse({ choices: [], usage: null }, "[DONE]"), null],
    ["no usage at all", '{"choices":[]}', null],
    [
      "generated text that spells a usage object is no key",
      JSON.stringify({ choices: [{ text: '"usage": {"prompt_tokens": 99}' }] }),
      null,
    ],
    ["cut off", '{"usage":{"prompt_tokens":5,"completion', null],
    ["not JSON", '{"usage":{"prompt_tokens":5,}}', null],
    ["a negative count", '{"usage":{"prompt_tokens":-1,"completion_tokens":2}}', null],
    ["a fractional count", '{"usage":{"prompt_tokens":1.5,"completion_tokens":2}}', null],
    ["a count in a string", '{"usage":{"prompt_tokens":"1","completion_tokens":2}}', null],
    ["no prompt count", '{"usage":{"completion_tokens":2}}', null],
    [
      "the last usage decides: a malformed one after a valid one counts nothing",
      '{"usage":{"prompt_tokens":1}}\n{"usage":{"prompt_tokens":"x"}}',
      null,
    ],
    ["usage that is a list", '{"usage":[1,2]}', null],
  ];
  for (const [what, text, want] of cases) assertEquals(findUsage(text), want, what);
});

Deno.test("usageCounts: either naming, non-negative integers only", () => {
  assertEquals(usageCounts({ prompt_tokens: 0, completion_tokens: 0 }), {
    prompt: 0,
    completion: 0,
  });
  assertEquals(usageCounts({ input_tokens: 8, output_tokens: 1 }), { prompt: 8, completion: 1 });
  assertEquals(usageCounts({ prompt_tokens: 2 ** 53, completion_tokens: 0 }), null);
  assertEquals(usageCounts(null), null);
  assertEquals(usageCounts("usage"), null);
});

Deno.test("findUsage: no generated text can fake or hide an answer's usage (property)", () => {
  const count = fc.integer({ min: 0, max: 1_000_000 });
  fc.assert(
    fc.property(fc.string({ unit: "binary" }), count, count, (text, p, c) => {
      // Whatever the engine generated, only the structural usage counts.
      const answer = { choices: [{ message: { content: text } }] };
      assertEquals(findUsage(JSON.stringify(answer)), null);
      const withUsage = { ...answer, usage: { prompt_tokens: p, completion_tokens: c } };
      assertEquals(findUsage(JSON.stringify(withUsage)), { prompt: p, completion: c });
      assertEquals(findUsage(`data: ${JSON.stringify(withUsage)}\n\ndata: [DONE]\n\n`), {
        prompt: p,
        completion: c,
      });
    }),
  );
});

Deno.test("findUsage: any text at all is read without throwing (property)", () => {
  fc.assert(fc.property(fc.string({ unit: "binary" }), (text) => {
    const got = findUsage(text);
    if (got !== null) {
      assertEquals(Number.isSafeInteger(got.prompt) && got.prompt >= 0, true);
      assertEquals(Number.isSafeInteger(got.completion) && got.completion >= 0, true);
    }
  }));
});

Deno.test("usageOfWhole: looks at the answer's last 16 KiB only", () => {
  const usage = '"usage":{"prompt_tokens":3,"completion_tokens":4}';
  const long = "x".repeat(WHOLE_TAIL_BYTES);
  assertEquals(usageOfWhole(enc.encode(`{"text":"${long}",${usage}}`)), {
    prompt: 3,
    completion: 4,
  });
  // Usage first, then more than the window: not looked for (no engine sends this).
  assertEquals(usageOfWhole(enc.encode(`{${usage},"text":"${long}"}`)), null);
});

Deno.test("TailBuffer: keeps the last bytes of any chunking (property)", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 64 }),
      fc.array(fc.uint8Array({ maxLength: 100 }), { maxLength: 20 }),
      (size, chunks) => {
        const tail = new TailBuffer(size);
        for (const c of chunks) tail.push(c);
        const all = chunks.flatMap((c) => [...c]);
        assertEquals([...tail.bytes()], all.slice(Math.max(0, all.length - size)));
      },
    ),
  );
  assertEquals(new TailBuffer().size, STREAM_TAIL_BYTES);
  assertThrows(() => new TailBuffer(0), RangeError, "Cannot keep a tail of 0 bytes");
});
