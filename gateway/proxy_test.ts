/**
 * The gateway (design §12) against REAL fake engines (tests/gateway_fixture.ts): the OpenAI surface, streaming and balancing, the official client.
 */
// The official client, for this test file only (not a dependency of llmgw).
// deno-lint-ignore no-import-prefix
import OpenAI from "npm:openai@^5";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { until } from "../tests/until.ts";
import { chat, post, withGateway } from "../tests/gateway_fixture.ts";

Deno.test("gateway: the OpenAI surface over two fake engines", async (t) => {
  await withGateway(
    [{ model: "demo" }, { model: "demo" }],
    ([a, b], table) => table.setEndpoints([a.spec("r1"), b.spec("r2")], ["demo", "cold"]),
    { maxBodyBytes: 64 * 1024 },
    async (gw) => {
      await t.step("GET /v1/models lists models with a ready endpoint", async () => {
        const r = await fetch(`${gw.url}/v1/models`);
        assertEquals(r.status, 200);
        const body = await r.json();
        assertEquals(body.object, "list");
        assertEquals(body.data.map((m: { id: string }) => m.id), ["demo"]);
      });
      await t.step("chat completion", async () => {
        const r = await post(gw, "/v1/chat/completions", chat("demo"));
        assertEquals(r.status, 200);
        const body = await r.json();
        assertEquals(body.object, "chat.completion");
        assertEquals(body.model, "demo");
        assertOk(body.choices[0].message.content.length > 0);
      });
      await t.step("streaming chat completion arrives chunk by chunk", async () => {
        const r = await post(gw, "/v1/chat/completions", chat("demo", true));
        assertEquals(r.status, 200);
        assertStringIncludes(r.headers.get("content-type") ?? "", "text/event-stream");
        const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
        const chunks: string[] = [];
        while (true) {
          const { done, value } = await reader.read();
          if (done) break;
          chunks.push(value);
        }
        const all = chunks.join("");
        const doneAt = chunks.findIndex((c) => c.includes("[DONE]"));
        assertOk(doneAt > 1, `>1 chunk before [DONE], got ${chunks.length} chunks`);
        assertOk(all.endsWith("data: [DONE]\n\n"));
        assertOk(all.split("\n\n").filter((e) => e.startsWith("data: {")).length >= 2);
      });
      await t.step("text completion", async () => {
        const r = await post(gw, "/v1/completions", { model: "demo", prompt: "hi" });
        assertEquals(r.status, 200);
        assertEquals((await r.json()).object, "text_completion");
      });
      await t.step("embeddings", async () => {
        const r = await post(gw, "/v1/embeddings", { model: "demo", input: ["a", "b"] });
        assertEquals(r.status, 200);
        const body = await r.json();
        assertEquals(body.data.length, 2);
        assertEquals(body.data[0].embedding.length, 8);
      });
      await t.step("errors in OpenAI's shape", async () => {
        const cases: [string, unknown, number, string | null][] = [
          ["/v1/chat/completions", chat("nope"), 404, "model_not_found"],
          ["/v1/chat/completions", "{not json", 400, "invalid_json"],
          ["/v1/chat/completions", "[1]", 400, "invalid_json"],
          ["/v1/completions", { prompt: "x" }, 400, "missing_model"],
          ["/v1/embeddings", { model: "cold", input: "x" }, 503, "model_not_ready"],
          ["/v1/embeddings", { model: "demo", input: "x".repeat(70_000) }, 413, null],
          ["/v1/nothing", chat("demo"), 404, "not_found"],
        ];
        for (const [path, body, status, code] of cases) {
          const r = await post(gw, path, body);
          assertEquals(r.status, status, `${path} ${JSON.stringify(body).slice(0, 40)}`);
          const e = (await r.json()).error;
          assertEquals(Object.keys(e).sort(), ["code", "message", "param", "type"]);
          if (code !== null) assertEquals(e.code, code);
          if (status === 400 || status === 404) assertEquals(e.type, "invalid_request_error");
          if (status === 503) assertEquals(r.headers.get("retry-after"), "5");
        }
      });
      await t.step(
        "field types are the engine's to judge: its 400 comes back as it sent it",
        async () => {
          const refused: [Record<string, unknown>, string][] = [
            [{ temperature: "hot" }, "body.temperature"],
            [{ messages: "hi" }, "body.messages"],
          ];
          for (const [body, param] of refused) {
            const r = await post(gw, "/v1/chat/completions", { ...chat("demo"), ...body });
            assertEquals(r.status, 400, JSON.stringify(body));
            const e = (await r.json()).error;
            assertEquals([e.type, e.param, e.code], ["Bad Request", param, 400]);
          }
        },
      );
    },
  );
});

Deno.test("gateway: concurrent slow streams spread over both engines", async () => {
  await withGateway(
    [
      { model: "demo", env: { FAKE_ENGINE_TOKEN_DELAY_MS: "150", FAKE_ENGINE_TOKENS: "10" } },
      { model: "demo", env: { FAKE_ENGINE_TOKEN_DELAY_MS: "150", FAKE_ENGINE_TOKENS: "10" } },
    ],
    ([a, b], table) => table.setEndpoints([a.spec("r1"), b.spec("r2")]),
    {},
    async (gw, [a, b], table) => {
      const responses = await Promise.all(
        Array.from({ length: 4 }, () => post(gw, "/v1/chat/completions", chat("demo", true))),
      );
      await until(
        "both engines running 2",
        async () => (await a.running()) === 2 && (await b.running()) === 2,
      );
      assertEquals(table.all().map((e) => [e.dispatched, e.outstanding]), [[2, 2], [2, 2]]);
      await Promise.all(responses.map((r) => r.text()));
      assertEquals(table.all().map((e) => e.outstanding), [0, 0]);
    },
  );
});

Deno.test("gateway: the official openai client, plain and streaming", async () => {
  await withGateway(
    [{ model: "demo" }, { model: "demo" }],
    ([a, b], table) => table.setEndpoints([a.spec("r1"), b.spec("r2")]),
    {},
    async (gw) => {
      const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const models = await client.models.list();
      assertEquals(models.data.map((m) => m.id), ["demo"]);
      const done = await client.chat.completions.create({
        model: "demo",
        messages: [{ role: "user", content: "hello" }],
      });
      assertOk((done.choices[0].message.content ?? "").length > 0);
      const stream = await client.chat.completions.create({
        model: "demo",
        messages: [{ role: "user", content: "hello" }],
        stream: true,
      });
      let deltas = 0;
      let finish: string | null = null;
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta?.content) deltas++;
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      assertOk(deltas > 1, `several deltas, got ${deltas}`);
      assertEquals(finish, "stop");
      const missing = await client.chat.completions.create({
        model: "nope",
        messages: [{ role: "user", content: "x" }],
      }).then(() => null, (e) => e);
      assertOk(missing instanceof OpenAI.NotFoundError, String(missing));
      assertEquals(missing.code, "model_not_found");
    },
  );
});
