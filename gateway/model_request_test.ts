import { assertEquals, assertOk } from "../tests/assert.ts";
import { readModelRequest } from "./model_request.ts";

const enc = new TextEncoder();

/** A request whose body is `text`, sent with its length or as a stream of unknown length. */
function request(text: string, declared = true): Request {
  const body = declared ? text : new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(enc.encode(text));
      c.close();
    },
  });
  return new Request("http://gw/v1/chat/completions", { method: "POST", body });
}

Deno.test("readModelRequest: the bytes as sent, the parsed body and its model", async () => {
  const text = '{ "model": "m", "n": 2 }';
  for (const declared of [true, false]) {
    const got = await readModelRequest(request(text, declared), 64);
    assertOk(!(got instanceof Response), "accepted");
    assertEquals(new TextDecoder().decode(got.bytes), text, "byte for byte");
    assertEquals([got.model, got.body.n], ["m", 2]);
  }
});

Deno.test("readModelRequest: each refusal with its status, code and param", async () => {
  const cases: [string, string, boolean, number, string | null, string | null][] = [
    ["not JSON", "{", true, 400, "invalid_json", null],
    ["an array", "[1]", true, 400, "invalid_json", null],
    ["null", "null", true, 400, "invalid_json", null],
    ["no model", '{"n":1}', true, 400, "missing_model", "model"],
    ["a model that is not a string", '{"model":7}', true, 400, "missing_model", "model"],
    ["an empty model", '{"model":""}', true, 400, "missing_model", "model"],
    [
      "over the limit, declared",
      `{"model":"${"m".repeat(80)}"}`,
      true,
      413,
      "request_too_large",
      null,
    ],
    [
      "over the limit, streamed",
      `{"model":"${"m".repeat(80)}"}`,
      false,
      413,
      "request_too_large",
      null,
    ],
  ];
  for (const [what, text, declared, status, code, param] of cases) {
    const got = await readModelRequest(request(text, declared), 64);
    assertOk(got instanceof Response, what);
    const error = (await got.json()).error;
    assertEquals([got.status, error.code, error.param], [status, code, param], what);
  }
});
