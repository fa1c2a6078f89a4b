import { assertEquals } from "../tests/assert.ts";
import { affinityKey, PROMPT_PREFIX_CHARS } from "./affinity_key.ts";

const none = new Headers();
const system = { role: "system", content: "You are a helpful assistant. ".repeat(50) };

Deno.test("affinityKey: a session header wins over the body", () => {
  const h = new Headers({ "x-session-id": " abc " });
  assertEquals(affinityKey("/v1/chat/completions", h, { messages: [] }), "session:abc");
  assertEquals(
    affinityKey("/v1/embeddings", new Headers({ "x-llmgw-session": "s" }), {}),
    "session:s",
  );
});

Deno.test("affinityKey: chat takes the first user message, never the shared system prompt", () => {
  const turn1 = { messages: [system, { role: "user", content: "plan a trip" }] };
  const turn3 = {
    messages: [system, { role: "user", content: "plan a trip" }, {
      role: "assistant",
      content: "ok",
    }, {
      role: "user",
      content: "to Lisbon",
    }],
  };
  const other = { messages: [system, { role: "user", content: "fix my code" }] };
  const k = affinityKey("/v1/chat/completions", none, turn1);
  assertEquals(k, "user:plan a trip");
  assertEquals(affinityKey("/v1/chat/completions", none, turn3), k, "later turns keep the key");
  assertEquals(affinityKey("/v1/chat/completions", none, other), "user:fix my code");
  // Content parts: the text parts joined.
  assertEquals(
    affinityKey("/v1/chat/completions", none, {
      messages: [{
        role: "user",
        content: [{ type: "text", text: "a" }, { type: "image_url" }, { type: "text", text: "b" }],
      }],
    }),
    "user:a\nb",
  );
  // Only a system prompt: no key (routed by load), not one key for everyone.
  assertEquals(affinityKey("/v1/chat/completions", none, { messages: [system] }), null);
});

Deno.test("affinityKey: the Responses API's input, a string or items", () => {
  assertEquals(affinityKey("/v1/responses", none, { input: "hi" }), "user:hi");
  assertEquals(
    affinityKey("/v1/responses", none, {
      input: [system, { role: "user", content: [{ type: "input_text", text: "q" }] }],
    }),
    "user:q",
  );
});

Deno.test("affinityKey: completions take the prompt's first blocks; embeddings and junk none", () => {
  const long = "x".repeat(PROMPT_PREFIX_CHARS) + "tail that changes";
  assertEquals(
    affinityKey("/v1/completions", none, { prompt: long }),
    `prompt:${"x".repeat(PROMPT_PREFIX_CHARS)}`,
  );
  assertEquals(
    affinityKey("/v1/completions", none, { prompt: ["first", "second"] }),
    "prompt:first",
  );
  assertEquals(affinityKey("/v1/embeddings", none, { input: "x" }), null);
  for (const body of [null, 3, "text", [], { messages: "no" }, { prompt: 5 }]) {
    assertEquals(affinityKey("/v1/chat/completions", none, body), null);
    assertEquals(affinityKey("/v1/completions", none, body), null);
  }
});
