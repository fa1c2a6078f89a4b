/** The endpoint list a gateway follows: valid answers, and each refusal's path. */
import { assertEquals, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import { formatPath } from "../validation/issues.ts";
import { type EndpointListAnswer, parseEndpointListAnswer } from "./gateway_protocol.ts";
import { WireFormatError } from "./wire_error.ts";

const HASH = "0123456789abcdef".repeat(4);

function answer(): EndpointListAnswer {
  return {
    endpoints: [
      { model: "llama-8b", replica_id: "llama-8b-r0", url: "http://10.0.0.1:8000" },
      { model: "llama-8b", replica_id: "llama-8b-r1", url: "http://[fd00::2]:8010" },
    ],
    api_keys: [
      { id: "key-0123abcd", hash: HASH, models: ["llama-8b"] },
      { id: "key-4567cdef", hash: HASH, models: null },
    ],
    models: ["llama-8b", "qwen-7b"],
    routing: { "llama-8b": "prefix_affinity" },
  };
}

function refusalPath(value: unknown): string {
  const e = assertThrows(() => parseEndpointListAnswer(value), WireFormatError) as WireFormatError;
  assertStringIncludes(e.message, "Cannot use the endpoint list: ");
  return formatPath(e.issues[0].path);
}

Deno.test("endpoint list: a valid answer parses to itself; unknown fields are dropped", () => {
  assertEquals(parseEndpointListAnswer(answer()), answer());
  const a = answer();
  const extra = {
    ...a,
    generation: 3,
    endpoints: a.endpoints.map((e) => ({ ...e, state: "ready" })),
  };
  assertEquals(parseEndpointListAnswer(extra), answer());
  // An older control plane sends no routing: the default for every model.
  assertEquals(parseEndpointListAnswer({ endpoints: [], api_keys: [], models: [] }), {
    endpoints: [],
    api_keys: [],
    models: [],
    routing: {},
  });
});

Deno.test("endpoint list: engine URLs are http(s) origins", () => {
  for (const url of ["http://10.0.0.1:8000", "https://engine.example", "http://h:1/"]) {
    const a = answer();
    a.endpoints[0].url = url;
    assertEquals(parseEndpointListAnswer(a).endpoints[0].url, url);
  }
  for (const url of ["ftp://x", "http://", "10.0.0.1:8000", "http://a b:1", "http://h:1/v1", ""]) {
    const a = answer();
    a.endpoints[1].url = url;
    assertEquals(refusalPath(a), "endpoints[1].url", url);
  }
});

Deno.test("endpoint list: each bad field is refused with its path", () => {
  const cases: [string, (a: EndpointListAnswer) => void, string][] = [
    ["empty model", (a) => a.endpoints[0].model = "", "endpoints[0].model"],
    [
      "unknown routing policy",
      (a) => (a.routing as Record<string, string>)["llama-8b"] = "round_robin",
      "routing.llama-8b",
    ],
    [
      "long replica id",
      (a) => a.endpoints[1].replica_id = "r".repeat(257),
      "endpoints[1].replica_id",
    ],
    ["upper-case hash", (a) => a.api_keys[0].hash = HASH.toUpperCase(), "api_keys[0].hash"],
    ["short hash", (a) => a.api_keys[1].hash = "abc", "api_keys[1].hash"],
    ["empty key id", (a) => a.api_keys[0].id = "", "api_keys[0].id"],
    ["empty model name", (a) => a.api_keys[0].models = [""], "api_keys[0].models[0]"],
    ["no key list", (a) => delete (a as Partial<EndpointListAnswer>).api_keys, "api_keys"],
    ["no endpoint list", (a) => delete (a as Partial<EndpointListAnswer>).endpoints, "endpoints"],
    ["no served names", (a) => delete (a as Partial<EndpointListAnswer>).models, "models"],
    ["an empty served name", (a) => a.models[1] = "", "models[1]"],
  ];
  for (const [name, breakIt, path] of cases) {
    const a = answer();
    breakIt(a);
    assertEquals(refusalPath(a), path, name);
  }
  assertEquals(refusalPath(null), "(top level)");
});
