/**
 * Tests of the fake engine's HTTP surface (dev/fake_engine/fake_engine_routes.ts and
 * the routes behind it), as real processes started through the shims: chat
 * and text completions, streaming, `n` choices, embeddings, the Responses
 * API, OpenAI errors, and the prefix cache's `cached_tokens`.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import {
  freePort,
  metric,
  readAll,
  sglangArgv,
  vllmArgv,
  withEngine,
} from "../../tests/fake_engine_harness.ts";

Deno.test("vLLM: chat and text completions, streaming, embeddings and OpenAI errors", async (t) => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_TOKENS: "6", FAKE_ENGINE_TOKEN_DELAY_MS: "20" },
    port,
    async (e) => {
      await e.waitHealthy();
      const messages = [{ role: "user", content: "Say something." }];

      await t.step("chat completion", async () => {
        const r = await e.post("/v1/chat/completions", { model: "fake-model", messages });
        assertEquals(r?.status, 200);
        const b = JSON.parse(r!.body);
        assertEquals([b.object, b.model, b.choices[0].message.role, b.choices[0].finish_reason], [
          "chat.completion",
          "fake-model",
          "assistant",
          "stop",
        ]);
        assertEquals(b.choices[0].message.content, "This is a reply from the");
        assertEquals(b.usage.completion_tokens, 6);
        assertEquals(b.usage.total_tokens, b.usage.prompt_tokens + 6);
        // No model means the served name, as in vLLM; max_tokens caps the reply.
        const short = JSON.parse(
          (await e.post("/v1/chat/completions", { messages, max_tokens: 2 }))!.body,
        );
        assertEquals([
          short.model,
          short.choices[0].message.content,
          short.choices[0].finish_reason,
        ], ["fake-model", "This is", "length"]);
      });

      await t.step("streaming chat completion", async () => {
        const reader = await e.stream("/v1/chat/completions", {
          model: "fake-model",
          messages,
          stream: true,
          stream_options: { include_usage: true },
        });
        const first = await reader.read();
        assertOk(
          !first.done && !first.value.includes("[DONE]"),
          "the first chunk comes before the end",
        );
        const events = await readAll(reader, first.value);
        assertEquals(events.at(-1), "[DONE]");
        const chunks = events.slice(0, -1).map((x) => JSON.parse(x));
        assertOk(
          chunks.every((c) => c.object === "chat.completion.chunk" && c.model === "fake-model"),
        );
        assertEquals(chunks[0].choices[0].delta, { role: "assistant", content: "" });
        const content = chunks.slice(1, 7).map((c) => c.choices[0].delta.content);
        assertEquals(content, ["This", " is", " a", " reply", " from", " the"]);
        assertEquals(chunks[7].choices[0].finish_reason, "stop");
        assertEquals([chunks[8].choices, chunks[8].usage.completion_tokens], [[], 6]);
        assertEquals(chunks.length, 9);
      });

      await t.step("text completion, plain and streamed", async () => {
        const r = JSON.parse(
          (await e.post("/v1/completions", { model: "fake-model", prompt: "Once" }))!.body,
        );
        assertEquals([r.object, r.choices[0].text, r.choices[0].finish_reason], [
          "text_completion",
          "This is a reply from the",
          "stop",
        ]);
        const reader = await e.stream("/v1/completions", {
          model: "fake-model",
          prompt: "Once",
          stream: true,
        });
        const events = await readAll(reader);
        const texts = events.slice(0, -1).map((x) => JSON.parse(x).choices[0].text);
        assertEquals(texts.join(""), "This is a reply from the");
        assertEquals(events.length, 8); // 6 tokens, the finish chunk, [DONE]
      });

      await t.step("embeddings are deterministic", async () => {
        const a = JSON.parse(
          (await e.post("/v1/embeddings", { model: "fake-model", input: ["alpha", "beta"] }))!.body,
        );
        const b = JSON.parse(
          (await e.post("/v1/embeddings", { model: "fake-model", input: "alpha" }))!.body,
        );
        assertEquals([a.object, a.data.length, a.data[0].object, a.data[0].embedding.length], [
          "list",
          2,
          "embedding",
          8,
        ]);
        assertEquals(b.data[0].embedding, a.data[0].embedding);
        assertOk(JSON.stringify(a.data[0].embedding) !== JSON.stringify(a.data[1].embedding));
      });

      await t.step("wrong model → 404, bad JSON or fields → 400, unknown path → 404", async () => {
        for (const path of ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]) {
          const r = await e.post(path, { model: "other", messages, prompt: "x", input: "x" });
          assertEquals(r?.status, 404);
          assertEquals(JSON.parse(r!.body).error, {
            message: "The model `other` does not exist.",
            type: "NotFoundError",
            param: "model",
            code: 404,
          });
          const bad = await e.post(path, "{not json");
          assertEquals(bad?.status, 400);
          assertEquals(JSON.parse(bad!.body).error.type, "BadRequestError");
        }
        assertEquals((await e.post("/v1/chat/completions", { model: "fake-model" }))?.status, 400);
        // Wrong types and shapes of OpenAI fields: vLLM's pydantic 400, naming the field.
        const refused: [Record<string, unknown>, string][] = [
          [{ messages, temperature: "hot" }, "body.temperature"],
          [{ messages: "hi" }, "body.messages"],
          [{ messages, stream: "maybe" }, "body.stream"],
        ];
        for (const [body, param] of refused) {
          const r = await e.post("/v1/chat/completions", { model: "fake-model", ...body });
          assertEquals(r?.status, 400, JSON.stringify(body));
          const error = JSON.parse(r!.body).error;
          assertEquals([error.type, error.param, error.code], ["Bad Request", param, 400]);
          assertStringIncludes(error.message, "1 validation error:");
        }
        const text = await e.post("/v1/completions", {
          model: "fake-model",
          prompt: "x",
          echo: [],
        });
        assertEquals([text?.status, JSON.parse(text!.body).error.param], [400, "body.echo"]);
        assertEquals(
          (await e.post("/v1/chat/completions", { model: "fake-model", messages, max_tokens: 0 }))
            ?.status,
          400,
        );
        assertEquals((await e.request("/v2/nothing"))?.status, 404);
        assertEquals((await e.request("/v1/chat/completions"))?.status, 405);
      });

      await t.step("/metrics counts what was served", async () => {
        const m = await e.request("/metrics");
        assertEquals(m?.status, 200);
        assertStringIncludes(m!.type ?? "", "text/plain");
        assertEquals(metric(m!.body, "vllm:num_requests_running"), 0);
        assertEquals(metric(m!.body, "vllm:num_requests_waiting"), 0);
        assertEquals(metric(m!.body, "vllm:kv_cache_usage_perc"), 0);
        assertEquals(metric(m!.body, "vllm:request_success_total"), 5);
      });
    },
  );
});

Deno.test("vLLM: n choices, plain and streamed, and the Responses API", async (t) => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_TOKENS: "4", FAKE_ENGINE_TOKEN_DELAY_MS: "1" },
    port,
    async (e) => {
      await e.waitHealthy();
      const messages = [{ role: "user", content: "Say something." }];

      await t.step("n choices, each counted in usage", async () => {
        const r = JSON.parse(
          (await e.post("/v1/chat/completions", { model: "fake-model", messages, n: 3 }))!.body,
        );
        assertEquals(r.choices.map((c: { index: number }) => c.index), [0, 1, 2]);
        assertOk(
          r.choices.every((c: { message: { content: string } }) =>
            c.message.content === "This is a reply"
          ),
        );
        assertEquals([r.usage.completion_tokens, r.usage.total_tokens], [
          12,
          r.usage.prompt_tokens + 12,
        ]);
        const text = JSON.parse(
          (await e.post("/v1/completions", { model: "fake-model", prompt: "x", n: 2 }))!.body,
        );
        assertEquals(text.choices.map((c: { text: string }) => c.text), [
          "This is a reply",
          "This is a reply",
        ]);
        // The handler refuses counts out of range; pydantic refuses what is not an integer
        // and takes a numeric string, as vLLM does.
        const refusals: [unknown, string][] = [[0, "n"], [129, "n"], [1.5, "body.n"], [
          "x",
          "body.n",
        ]];
        for (const [n, param] of refusals) {
          const bad = await e.post("/v1/chat/completions", { model: "fake-model", messages, n });
          assertEquals(bad?.status, 400, `n=${JSON.stringify(n)}`);
          assertEquals(JSON.parse(bad!.body).error.param, param);
        }
        const lax = await e.post("/v1/chat/completions", { model: "fake-model", messages, n: "2" });
        assertEquals(JSON.parse(lax!.body).choices.length, 2);
      });

      await t.step("n streamed choices, then the usage chunk", async () => {
        const reader = await e.stream("/v1/chat/completions", {
          model: "fake-model",
          messages,
          n: 2,
          stream: true,
          stream_options: { include_usage: true },
        });
        const chunks = (await readAll(reader)).slice(0, -1).map((x) => JSON.parse(x));
        const usage = chunks.at(-1);
        assertEquals([usage.choices, usage.usage.completion_tokens], [[], 8]);
        for (const index of [0, 1]) {
          const mine = chunks.slice(0, -1).map((c) => c.choices[0]).filter((c) =>
            c.index === index
          );
          assertEquals(mine[0].delta, { role: "assistant", content: "" });
          assertEquals(mine.map((c) => c.delta.content ?? "").join(""), "This is a reply");
          assertEquals(mine.at(-1).finish_reason, "stop");
        }
      });

      await t.step("a response: one assistant message of output_text, with usage", async () => {
        const r = await e.post("/v1/responses", {
          model: "fake-model",
          input: [{ role: "user", content: [{ type: "input_text", text: "Say something." }] }],
          instructions: "Be brief.",
        });
        assertEquals(r?.status, 200);
        const b = JSON.parse(r!.body);
        assertEquals([b.object, b.model, b.status, b.incomplete_details], [
          "response",
          "fake-model",
          "completed",
          null,
        ]);
        assertOk(b.id.startsWith("resp_"), b.id);
        assertEquals(b.output.length, 1);
        assertEquals([b.output[0].type, b.output[0].role, b.output[0].status], [
          "message",
          "assistant",
          "completed",
        ]);
        assertEquals(b.output[0].content, [
          { type: "output_text", text: "This is a reply", annotations: [] },
        ]);
        assertEquals(b.usage.output_tokens, 4);
        assertEquals(b.usage.total_tokens, b.usage.input_tokens + 4);
        const short = JSON.parse(
          (await e.post("/v1/responses", { input: "x", max_output_tokens: 2 }))!.body,
        );
        assertEquals([short.model, short.status, short.incomplete_details], [
          "fake-model",
          "incomplete",
          { reason: "max_output_tokens" },
        ]);
        assertEquals(short.output[0].content[0].text, "This is");
        for (
          const body of [{ model: "fake-model" }, { input: [] }, { input: "x", instructions: 1 }, {
            input: "x",
            max_output_tokens: 0,
          }]
        ) {
          assertEquals((await e.post("/v1/responses", body))?.status, 400, JSON.stringify(body));
        }
        assertEquals((await e.post("/v1/responses", { model: "other", input: "x" }))?.status, 404);
      });

      await t.step("a streamed response: response.* events, named and numbered", async () => {
        const reader = await e.stream("/v1/responses", { input: "x", stream: true });
        let text = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          text += value;
        }
        assertOk(!text.includes("[DONE]"), "the Responses API sends no [DONE]");
        const events = text.split("\n\n").filter((x) => x !== "").map((x) => {
          const m = /^event: (\S+)\ndata: (.*)$/.exec(x);
          assertOk(m !== null, `not an event: ${x}`);
          const data = JSON.parse(m[2]);
          assertEquals(data.type, m[1]);
          return data;
        });
        assertEquals(events.map((x) => x.type), [
          "response.created",
          "response.in_progress",
          "response.output_item.added",
          "response.content_part.added",
          ...Array(4).fill("response.output_text.delta"),
          "response.output_text.done",
          "response.content_part.done",
          "response.output_item.done",
          "response.completed",
        ]);
        assertEquals(events.map((x) => x.sequence_number), events.map((_, i) => i));
        const deltas = events.filter((x) => x.type === "response.output_text.delta");
        assertEquals(deltas.map((x) => x.delta).join(""), "This is a reply");
        assertEquals(events[0].response.usage, null);
        const done = events.at(-1).response;
        assertEquals([done.status, done.output[0].content[0].text, done.usage.output_tokens], [
          "completed",
          "This is a reply",
          4,
        ]);
      });
    },
  );
});

Deno.test("SGLang: no Responses API (FastAPI's 404), n choices served", async () => {
  const port = freePort();
  await withEngine(
    sglangArgv(port),
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_TOKENS: "2", FAKE_ENGINE_TOKEN_DELAY_MS: "1" },
    port,
    async (e) => {
      await e.waitHealthy();
      const r = await e.post("/v1/responses", { model: "fake-model", input: "x" });
      assertEquals([r?.status, r && JSON.parse(r.body)], [404, { detail: "Not Found" }]);
      const chat = JSON.parse(
        (await e.post("/v1/chat/completions", {
          model: "fake-model",
          messages: [{ role: "user", content: "x" }],
          n: 2,
        }))!.body,
      );
      assertEquals(chat.choices.length, 2);
    },
  );
});

Deno.test("vLLM with a prefix cache: a repeated conversation is served from cache, and the counters say so", async () => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    {
      FAKE_ENGINE_LOAD_SECONDS: "0",
      FAKE_ENGINE_TOKENS: "2",
      FAKE_ENGINE_TOKEN_DELAY_MS: "0",
      FAKE_ENGINE_PREFIX_CACHE_BLOCKS: "1000",
    },
    port,
    async (e) => {
      await e.waitHealthy();
      const messages = [
        { role: "system", content: "You are a helpful assistant. ".repeat(20) },
        { role: "user", content: "Plan a trip to Lisbon." },
      ];
      const cached = async () => {
        const r = await e.post("/v1/chat/completions", { model: "fake-model", messages });
        assertEquals(r?.status, 200);
        const usage = JSON.parse(r!.body).usage;
        return [usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens];
      };
      const [tokens, first] = await cached();
      assertEquals(first, 0, "nothing cached at first");
      const [, second] = await cached();
      // Every full block of 16 tokens is found the second time.
      assertEquals(second, Math.floor(tokens / 16) * 16);
      const metrics = (await e.request("/metrics"))!.body;
      const hits = /^vllm:prefix_cache_hits_total\{[^}]*\} (\S+)$/m.exec(metrics);
      assertEquals(Number(hits?.[1]), second);
    },
  );
});
