import { assertEquals, assertOk } from "../../tests/assert.ts";
import { checkRequest, MAX_REPORTED_ERRORS, validationError } from "./fake_engine_request.ts";

const MESSAGES = [{ role: "user", content: "hi" }];

/** The first error's type and location, or "ok". */
function verdict(body: Record<string, unknown>, kind: "chat" | "text" = "chat"): string {
  const c = checkRequest(body, kind);
  return c.ok ? "ok" : `${c.errors[0].type} ${c.errors[0].loc}`;
}

Deno.test("checkRequest: what vLLM's pydantic models refuse, field by field", () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ messages: MESSAGES }, "ok"],
    [{ messages: MESSAGES, temperature: "hot" }, "float_parsing body.temperature"],
    [{ messages: MESSAGES, temperature: [1] }, "float_type body.temperature"],
    [{ messages: MESSAGES, temperature: "0.7", top_p: 1 }, "ok"],
    [{ messages: MESSAGES, temperature: null }, "ok"],
    [{ messages: "hi" }, "list_type body.messages"],
    [{ messages: { role: "user" } }, "list_type body.messages"],
    [{}, "missing body.messages"],
    [{ messages: ["hi"] }, "dict_type body.messages.0"],
    [{ messages: [{ content: "hi" }] }, "missing body.messages.0.role"],
    [{ messages: [{ role: 1, content: "hi" }] }, "string_type body.messages.0.role"],
    [{ messages: [{ role: "user", content: 5 }] }, "string_type body.messages.0.content"],
    [{ messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }] }, "ok"],
    [{ messages: MESSAGES, model: 7 }, "string_type body.model"],
    [{ messages: MESSAGES, max_tokens: "ten" }, "int_parsing body.max_tokens"],
    [{ messages: MESSAGES, max_tokens: 1.5 }, "int_from_float body.max_tokens"],
    [{ messages: MESSAGES, max_tokens: "16", n: "2" }, "ok"],
    [{ messages: MESSAGES, n: {} }, "int_type body.n"],
    [{ messages: MESSAGES, stream: "maybe" }, "bool_parsing body.stream"],
    [{ messages: MESSAGES, stream: [] }, "bool_type body.stream"],
    [{ messages: MESSAGES, stream: "yes" }, "ok"],
    [{ messages: MESSAGES, stop: 5 }, "string_type body.stop"],
    [{ messages: MESSAGES, stop: ["a", "b"] }, "ok"],
    [{ messages: MESSAGES, stream_options: "usage" }, "dict_type body.stream_options"],
    [{ messages: MESSAGES, logprobs: 5 }, "bool_type body.logprobs"],
    [{ messages: MESSAGES, made_up_field: "anything" }, "ok"],
    [{ prompt: "x", logprobs: 5, echo: "yes" }, "ok"],
    [{ prompt: "x", logprobs: true, temperature: "hot" }, "float_parsing body.temperature"],
  ];
  for (const [body, want] of cases) {
    const kind = "prompt" in body ? "text" : "chat";
    assertEquals(verdict(body, kind), want, JSON.stringify(body));
  }
});

Deno.test("checkRequest: lax values reach the handler converted, as pydantic hands them on", () => {
  const c = checkRequest({ messages: MESSAGES, n: "2", stream: "yes", max_tokens: 3.0 }, "chat");
  assertOk(c.ok);
  assertEquals([c.body.n, c.body.stream, c.body.max_tokens], [2, true, 3]);
});

Deno.test("validationError: vLLM's 400, its envelope, message and param", async () => {
  const c = checkRequest({ messages: "hi", temperature: "hot" }, "chat");
  assertOk(!c.ok);
  const r = validationError(c.errors);
  assertEquals(r.status, 400);
  assertEquals(await r.json(), {
    error: {
      message: "2 validation errors:\n" +
        "  {'type': 'list_type', 'loc': 'body.messages', 'msg': 'Input should be a valid list', " +
        "'input': 'hi'}\n" +
        "  {'type': 'float_parsing', 'loc': 'body.temperature', 'msg': 'Input should be a valid " +
        "number, unable to parse string as a number', 'input': 'hot'}",
      type: "Bad Request",
      param: "body.messages",
      code: 400,
    },
  });
  // Many errors are bounded; quotes in a value are Python's.
  const many = Array.from({ length: 12 }, (_, i) => ({
    type: "string_type",
    loc: `body.messages.${i}.role`,
    msg: "Input should be a valid string",
    input: i === 0 ? "it's" : [1, 2],
  }));
  const body = await validationError(many).json();
  const lines = body.error.message.split("\n");
  assertEquals(lines.length, 1 + MAX_REPORTED_ERRORS + 1);
  assertEquals(lines[0], "12 validation errors:");
  assertOk(lines[1].endsWith(`'input': "it's"}`), lines[1]);
  assertOk(lines[2].endsWith("'input': '<list of 2 items>'}"), lines[2]);
  assertEquals(lines.at(-1), "  ...and 2 more errors");
});
