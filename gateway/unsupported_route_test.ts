import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { lacksRoute, unsupportedEndpoint } from "./unsupported_route.ts";

const enc = new TextEncoder();

Deno.test("lacksRoute: the framework's 404 and a proxy's refusal, not the engine's own error", () => {
  const none = new Headers();
  const refused = new Headers({ "x-llmgw-proxy-refused": "route_not_allowed" });
  const cases: [string, Headers, string, boolean][] = [
    ["FastAPI's 404 (vLLM without the route, SGLang)", none, '{"detail":"Not Found"}', true],
    ["an empty body", none, "", true],
    ["not JSON", none, "<html>404</html>", true],
    ["an error that is a string", none, '{"error":"Not Found"}', true],
    [
      "vLLM's own 404: an unknown previous_response_id",
      none,
      '{"error":{"message":"Response with id resp_1 not found.","type":"NotFoundError","param":null,"code":404}}',
      false,
    ],
    [
      "an engine proxy that does not forward the route",
      refused,
      '{"error":{"code":"route_not_allowed","message":"POST /v1/responses is not forwarded"}}',
      true,
    ],
  ];
  for (const [what, headers, body, want] of cases) {
    assertEquals(lacksRoute(headers, enc.encode(body)), want, what);
  }
});

Deno.test("unsupportedEndpoint: an OpenAI 404 naming the model and the API", async () => {
  const r = unsupportedEndpoint("qwen/Qwen3-8B", "/v1/responses");
  assertEquals(r.status, 404);
  const { error } = await r.json();
  assertEquals([error.type, error.code, error.param], [
    "invalid_request_error",
    "unsupported_endpoint",
    null,
  ]);
  assertStringIncludes(error.message, "`qwen/Qwen3-8B` does not serve the Responses API");
  const other = await unsupportedEndpoint("m", "/v1/embeddings").json();
  assertEquals(other.error.message, "The model `m` does not serve POST /v1/embeddings");
});
