/**
 * The gateway (design §12) against REAL fake engines (tests/gateway_fixture.ts): the Responses API, usage per API key, the body byte for byte, prefix affinity.
 */
// The official client, for this test file only (not a dependency of llmgw).
// deno-lint-ignore no-import-prefix
import OpenAI from "npm:openai@^5";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { EndpointTable } from "./endpoints.ts";
import { startGateway } from "./server.ts";
import { ApiKeyTable } from "./api_keys.ts";
import { lintExposition } from "../tests/prometheus_lint.ts";
import { post, withGateway } from "../tests/gateway_fixture.ts";

function sample(metrics: string, series: string): number | undefined {
  const line = metrics.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("gateway: the official openai client retrieves models and creates responses, plain and streamed", async () => {
  const model = "meta-llama/Llama-3.1-8B";
  await withGateway(
    [{ model }],
    ([a], table) => table.setEndpoints([a.spec("r1")], [model, "cold"]),
    {},
    async (gw) => {
      const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "unused", maxRetries: 0 });
      // The client escapes the slash (%2F); a plain slash works too.
      const found = await client.models.retrieve(model);
      assertEquals({ ...found }, { id: model, object: "model", created: 0, owned_by: "llmgw" });
      const plain = await fetch(`${gw.url}/v1/models/${model}`);
      assertEquals(await plain.json(), { ...found });
      for (const id of ["nope", "cold", "meta-llama"]) {
        const missing = await client.models.retrieve(id).then(() => null, (e) => e);
        assertOk(missing instanceof OpenAI.NotFoundError, `${id}: ${missing}`);
        assertEquals([missing.code, missing.type, missing.param], [
          "model_not_found",
          "invalid_request_error",
          null,
        ]);
      }

      const answer = await client.responses.create({
        model,
        input: "hello",
        instructions: "Be brief.",
      });
      assertEquals([answer.object, answer.model, answer.status], ["response", model, "completed"]);
      assertEquals(answer.output_text, "This is a reply from the llmgw fake");
      assertEquals(answer.usage?.output_tokens, 8);

      const stream = await client.responses.create({ model, input: "hello", stream: true });
      const types: string[] = [];
      let deltas = "";
      let completed: OpenAI.Responses.Response | null = null;
      for await (const event of stream) {
        types.push(event.type);
        if (event.type === "response.output_text.delta") deltas += event.delta;
        if (event.type === "response.completed") completed = event.response;
      }
      assertEquals(types[0], "response.created");
      assertEquals(types.at(-1), "response.completed");
      assertEquals(types.filter((t) => t === "response.output_text.delta").length, 8);
      assertEquals(deltas, "This is a reply from the llmgw fake");
      assertOk(completed !== null);
      const [item] = completed.output;
      assertOk(item.type === "message" && item.content[0].type === "output_text", item.type);
      assertEquals(item.content[0].text, deltas);

      // Both answers' usage, counted for the open gateway's "none" key.
      const metrics = await (await fetch(`${gw.url}/metrics`)).text();
      assertEquals(lintExposition(metrics), []);
      const series = (kind: string) =>
        `llmgw_gateway_tokens_total{model="${model}",api_key="none",kind="${kind}"}`;
      assertEquals(
        sample(metrics, series("prompt")),
        answer.usage!.input_tokens + completed.usage!.input_tokens,
      );
      assertEquals(sample(metrics, series("completion")), 16);
    },
  );
});

Deno.test("gateway: an engine without the Responses API gets the client an OpenAI 404 naming the model", async () => {
  await withGateway(
    [{ model: "demo", engine: "sglang" }],
    ([a], table) => table.setEndpoints([a.spec("r1")]),
    {},
    async (gw) => {
      const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const refused = await client.responses.create({ model: "demo", input: "hi" })
        .then(() => null, (e) => e);
      assertOk(refused instanceof OpenAI.NotFoundError, String(refused));
      assertEquals(refused.code, "unsupported_endpoint");
      assertStringIncludes(refused.message, "`demo` does not serve the Responses API");
      // The same engine serves chat completions.
      const chat = await client.chat.completions.create({
        model: "demo",
        messages: [{ role: "user", content: "hi" }],
      });
      assertOk((chat.choices[0].message.content ?? "").length > 0);
      const metrics = await (await fetch(`${gw.url}/metrics`)).text();
      assertStringIncludes(
        metrics,
        'llmgw_gateway_requests_total{model="demo",outcome="unsupported_endpoint"} 1',
      );
    },
  );
});

Deno.test("gateway: n and stream_options reach the engine; usage is counted per API key", async () => {
  const keys = new ApiKeyTable();
  keys.set([{ id: "team-a", hash: await sha256Hex("sk-team-a"), models: null }]);
  await withGateway(
    [{ model: "demo" }],
    ([a], table) => table.setEndpoints([a.spec("r1")]),
    { keys },
    async (gw) => {
      const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "sk-team-a", maxRetries: 0 });
      const messages = [{ role: "user" as const, content: "hello" }];
      const three = await client.chat.completions.create({ model: "demo", messages, n: 3 });
      assertEquals(three.choices.map((c) => c.index), [0, 1, 2]);
      assertEquals(three.usage?.completion_tokens, 24);
      const stream = await client.chat.completions.create({
        model: "demo",
        messages,
        n: 2,
        stream: true,
        stream_options: { include_usage: true },
      });
      const indices = new Set<number>();
      let usage: OpenAI.CompletionUsage | null = null;
      for await (const chunk of stream) {
        for (const c of chunk.choices) indices.add(c.index);
        usage = chunk.usage ?? usage;
      }
      assertEquals([...indices].sort(), [0, 1]);
      assertOk(usage !== null, "the engine's usage chunk came through");
      assertEquals(usage.completion_tokens, 16);
      // Without include_usage the engine sends none, and nothing is counted for it.
      const quiet = await client.chat.completions.create({ model: "demo", messages, stream: true });
      for await (const chunk of quiet) assertEquals(chunk.usage ?? null, null);

      const metrics = await (await fetch(`${gw.url}/metrics`)).text();
      assertEquals(lintExposition(metrics), []);
      assertOk(!metrics.includes("sk-team-a"), "the key's secret is never a label");
      const series = (kind: string) =>
        `llmgw_gateway_tokens_total{model="demo",api_key="team-a",kind="${kind}"}`;
      assertEquals(sample(metrics, series("completion")), 24 + 16);
      assertEquals(
        sample(metrics, series("prompt")),
        three.usage!.prompt_tokens + usage.prompt_tokens,
      );
    },
  );
});

Deno.test("gateway: the body reaches the engine byte for byte, and what comes back is counted or passed on", async () => {
  // A recording engine stand-in; its answer is chosen by the request's path and `user`.
  const received: string[] = [];
  const enc = new TextEncoder();
  const engine = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const text = await req.text();
    received.push(text);
    const user = JSON.parse(text).user;
    if (new URL(req.url).pathname === "/v1/responses") {
      return user === "previous"
        ? Response.json({
          error: {
            message: "Response with id resp_x not found.",
            type: "NotFoundError",
            param: null,
            code: 404,
          },
        }, { status: 404 })
        : Response.json({ detail: "Not Found" }, { status: 404 });
    }
    if (user === "stream" || user === "chunked") {
      // The usage split across writes: an SSE usage chunk, or a JSON answer
      // without Content-Length (as an agent's engine proxy relays one).
      const parts = user === "stream"
        ? [
          'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n',
          'data: {"choices":[],"usage":{"prompt_tokens":7,"comp',
          'letion_tokens":3,"total_tokens":10}}\n\ndata: [DONE]\n\n',
        ]
        : [`{"choices":[{"text":"${"y".repeat(5000)}"}],"usage":{"prompt_`, 'tokens":11}}'];
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const next = parts.shift();
          if (next === undefined) return controller.close();
          await new Promise((r) => setTimeout(r, 1));
          controller.enqueue(enc.encode(next));
        },
      });
      const type = user === "stream" ? "text/event-stream" : "application/json";
      return new Response(body, { headers: { "content-type": type } });
    }
    const usage = user === "malformed"
      ? { prompt_tokens: "7", completion_tokens: 1 }
      : { prompt_tokens: 5, completion_tokens: 2 };
    return Response.json({ choices: [{ index: 0, message: { content: "x" } }], usage });
  });
  const table = new EndpointTable();
  table.setEndpoints([{
    model: "m",
    replica_id: "r",
    url: `http://127.0.0.1:${engine.addr.port}`,
  }]);
  const gw = startGateway(table, { hostname: "127.0.0.1", port: 0 });
  try {
    const sent =
      '{"model":"m",  "n": 2,"stream_options":{"include_usage":true,"x":[1,2.50]},"user":"whole",' +
      '"messages":[{"role":"user","content":"h\\u00e9"}]}';
    const whole = await post(gw, "/v1/chat/completions", sent);
    assertEquals(whole.status, 200);
    await whole.body?.cancel();
    assertEquals(received, [sent], "forwarded untouched: field order, spacing, escapes");
    const stream = await post(gw, "/v1/chat/completions", { model: "m", user: "stream" });
    assertStringIncludes(await stream.text(), '"completion_tokens":3');
    const chunked = await post(gw, "/v1/embeddings", { model: "m", user: "chunked" });
    assertEquals(chunked.headers.get("content-length"), null);
    assertEquals((await chunked.json()).usage, { prompt_tokens: 11 });
    const malformed = await post(gw, "/v1/chat/completions", { model: "m", user: "malformed" });
    assertEquals((await malformed.json()).usage.prompt_tokens, "7", "relayed as it came");
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    assertEquals(lintExposition(metrics), []);
    const series = (kind: string) =>
      `llmgw_gateway_tokens_total{model="m",api_key="none",kind="${kind}"}`;
    assertEquals([sample(metrics, series("prompt")), sample(metrics, series("completion"))], [
      5 + 7 + 11,
      2 + 3,
    ]);

    // /v1/responses: FastAPI's 404 is turned into OpenAI's; the engine's own 404 goes through.
    const lacking = await post(gw, "/v1/responses", { model: "m", input: "x" });
    assertEquals(lacking.status, 404);
    assertEquals((await lacking.json()).error.code, "unsupported_endpoint");
    const own = await post(gw, "/v1/responses", {
      model: "m",
      input: "x",
      user: "previous",
      previous_response_id: "resp_x",
    });
    assertEquals(own.status, 404);
    assertEquals((await own.json()).error.message, "Response with id resp_x not found.");
  } finally {
    await gw.close();
    await engine.shutdown();
  }
});

Deno.test("gateway: prefix affinity sends each conversation's turns to one replica, conversations spread", async () => {
  await withGateway(
    [{ model: "demo" }, { model: "demo" }],
    ([a, b], table) =>
      table.setEndpoints([a.spec("r1"), b.spec("r2")], ["demo"], { demo: "prefix_affinity" }),
    {},
    async (gw, _engines, table) => {
      const system = { role: "system", content: "a long shared system prompt ".repeat(40) };
      const homes = new Map<string, string>();
      for (let conversation = 0; conversation < 12; conversation++) {
        const history: { role: string; content: string }[] = [system, {
          role: "user",
          content: `conversation ${conversation}: hello`,
        }];
        for (let turn = 0; turn < 3; turn++) {
          const before = table.all().map((e) => e.dispatched);
          const r = await post(gw, "/v1/chat/completions", {
            model: "demo",
            messages: history,
            max_tokens: 2,
          });
          assertEquals(r.status, 200);
          await r.body?.cancel();
          const after = table.all().map((e) => e.dispatched);
          const went = table.all()[after.findIndex((d, i) => d !== before[i])].replica_id;
          const home = homes.get(`c${conversation}`) ?? went;
          assertEquals(went, home, `conversation ${conversation}, turn ${turn}`);
          homes.set(`c${conversation}`, home);
          history.push({ role: "assistant", content: "ok" }, {
            role: "user",
            content: `turn ${turn + 1}`,
          });
        }
      }
      // One at a time, so never over the bound: both replicas still get conversations.
      assertEquals(new Set(homes.values()).size, 2, "conversations spread over both replicas");
    },
  );
});
