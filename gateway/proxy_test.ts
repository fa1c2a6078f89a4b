/**
 * The gateway (design §12) against REAL fake engines (testing/fake_engine.ts
 * through the `testing/bin/vllm` shim): routing, streaming, balancing,
 * retries, upstream death and client disconnects.
 *
 * Every engine is its own process group (`detached: true`) and is SIGKILLed
 * by group in a `finally`.
 */
import { fileURLToPath } from "node:url";
// The official client, for this test file only (not a dependency of llmgw).
// deno-lint-ignore no-import-prefix
import OpenAI from "npm:openai@^5";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { until } from "../tests/until.ts";
import { type EndpointSpec, EndpointTable } from "./endpoints.ts";
import { type RunningGateway, startGateway } from "./server.ts";
import type { GatewayOptions } from "./app.ts";
import { ApiKeyTable } from "./api_keys.ts";
import { lintExposition } from "../testing/prometheus_lint.ts";

const SHIMS = fileURLToPath(new URL("../testing/bin", import.meta.url));

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** A fake vLLM (or SGLang) on a free loopback port. */
class Engine {
  readonly port = freePort();
  readonly url = `http://127.0.0.1:${this.port}`;
  readonly child: Deno.ChildProcess;
  constructor(
    readonly model: string,
    env: Record<string, string>,
    engine: "vllm" | "sglang" = "vllm",
  ) {
    const where = [
      "--served-model-name",
      model,
      "--host",
      "127.0.0.1",
      "--port",
      String(this.port),
    ];
    const [command, args] = engine === "vllm"
      ? [`${SHIMS}/vllm`, ["serve", `org/${model}`, ...where]]
      : [`${SHIMS}/python3`, [
        "-m",
        "sglang.launch_server",
        "--model-path",
        `org/${model}`,
        ...where,
      ]];
    this.child = new Deno.Command(command, {
      args,
      env: {
        PATH: `${SHIMS}:${Deno.env.get("PATH")}`,
        FAKE_ENGINE_LOAD_SECONDS: "0",
        FAKE_ENGINE_ACCESS_LOG: "0",
        ...env,
      },
      stdin: "null",
      stdout: "null",
      stderr: "null",
      detached: true,
    }).spawn();
  }
  spec(replica_id: string): EndpointSpec {
    return { model: this.model, replica_id, url: this.url };
  }
  async ready(): Promise<void> {
    // A refused connection is "not listening yet": until retries it.
    await until(`the engine on ${this.port} to answer /health`, async () => {
      const r = await fetch(`${this.url}/health`);
      await r.body?.cancel();
      return r.ok;
    }, { timeoutMs: 20_000 });
  }
  async running(): Promise<number> {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    const m = /^vllm:num_requests_running\{[^}]*\} (\S+)$/m.exec(text);
    return Number(m?.[1] ?? NaN);
  }
  kill(): void {
    try {
      Deno.kill(-this.child.pid, "SIGKILL");
    } catch {
      // Gone.
    }
  }
}

/** Starts engines and a gateway over them; kills and closes everything after `fn`. */
async function withGateway(
  engines: { model: string; env?: Record<string, string>; engine?: "vllm" | "sglang" }[],
  setup: (engines: Engine[], table: EndpointTable) => void,
  options: GatewayOptions & { random?: () => number },
  fn: (gw: RunningGateway, engines: Engine[], table: EndpointTable) => Promise<void>,
): Promise<void> {
  const started: Engine[] = [];
  let gw: RunningGateway | undefined;
  try {
    for (const e of engines) started.push(new Engine(e.model, e.env ?? {}, e.engine));
    await Promise.all(started.map((e) => e.ready()));
    const table = new EndpointTable({ random: options.random });
    setup(started, table);
    gw = startGateway(table, { hostname: "127.0.0.1", port: 0, ...options });
    await fn(gw, started, table);
  } finally {
    await gw?.close();
    for (const e of started) e.kill();
    await Promise.all(started.map((e) => e.child.status));
  }
}

function post(gw: RunningGateway, path: string, body: unknown, init: RequestInit = {}) {
  return fetch(`${gw.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
}

const chat = (model: string, stream = false) => ({
  model,
  stream,
  messages: [{ role: "user", content: "hello" }],
});

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

Deno.test("gateway: an endpoint refusing connections is retried on another", async () => {
  const closed = { model: "demo", replica_id: "dead", url: `http://127.0.0.1:${freePort()}` };
  await withGateway(
    [{ model: "demo" }],
    ([a], table) => table.setEndpoints([closed, a.spec("r1")]),
    // Both endpoints are always drawn; the tie goes to the first drawn: index 0, the closed one.
    { random: () => 0 },
    async (gw, _engines, table) => {
      const r = await post(gw, "/v1/chat/completions", chat("demo"));
      assertEquals(r.status, 200);
      await r.body?.cancel();
      const [dead, live] = table.all();
      assertEquals([dead.dispatched, live.dispatched], [1, 1]);
      assertOk(dead.suspectSince !== null, "the refusing endpoint is suspect");
      assertEquals([dead.outstanding, live.outstanding], [0, 0]);
      // Now the suspect is skipped outright.
      const again = await post(gw, "/v1/embeddings", { model: "demo", input: "x" });
      assertEquals(again.status, 200);
      await again.body?.cancel();
      assertEquals([dead.dispatched, live.dispatched], [1, 2]);
      // Per-replica metrics: the failed attempt and the two answered ones.
      const metrics = await (await fetch(`${gw.url}/metrics`)).text();
      assertStringIncludes(
        metrics,
        'llmgw_gateway_replica_requests_total{model="demo",replica="dead",outcome="upstream_unreachable"} 1',
      );
      assertStringIncludes(
        metrics,
        'llmgw_gateway_replica_requests_total{model="demo",replica="r1",outcome="ok"} 2',
      );
      assertStringIncludes(
        metrics,
        'llmgw_gateway_replica_request_duration_seconds_count{model="demo",replica="r1"} 2',
      );
    },
  );
});

Deno.test("gateway: no endpoint reachable gives 502 after bounded retries", async () => {
  const table = new EndpointTable();
  const dead = [1, 2, 3, 4].map((i) => ({
    model: "demo",
    replica_id: `d${i}`,
    url: `http://127.0.0.1:${freePort()}`,
  }));
  table.setEndpoints(dead);
  const gw = startGateway(table, { hostname: "127.0.0.1", port: 0 });
  try {
    const r = await post(gw, "/v1/chat/completions", chat("demo"));
    assertEquals(r.status, 502);
    assertEquals((await r.json()).error.code, "upstream_unreachable");
    assertEquals(table.all().reduce((n, e) => n + e.dispatched, 0), 3, "1 try + 2 retries");
  } finally {
    await gw.close();
  }
});

Deno.test("gateway: an upstream killed mid-stream ends the SSE stream with an error event", async () => {
  await withGateway(
    [{ model: "demo", env: { FAKE_ENGINE_TOKEN_DELAY_MS: "200", FAKE_ENGINE_TOKENS: "50" } }],
    ([a], table) => table.setEndpoints([a.spec("r1")]),
    {},
    async (gw, [engine], table) => {
      const r = await post(gw, "/v1/chat/completions", chat("demo", true));
      assertEquals(r.status, 200);
      const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = (await reader.read()).value ?? "";
      engine.kill();
      while (true) {
        const { done, value } = await reader.read();
        if (done) break;
        text += value;
      }
      const events = text.split("\n\n").filter((e) => e.trim() !== "");
      const last = events[events.length - 1];
      assertOk(last.startsWith("data: {"), last);
      const err = JSON.parse(last.slice("data: ".length)).error;
      assertEquals(err.type, "server_error");
      assertOk(!text.includes("[DONE]"));
      const [e] = table.all();
      assertOk(e.suspectSince !== null, "marked suspect");
      assertEquals(e.outstanding, 0);
    },
  );
});

Deno.test("gateway: after an engine dies mid-stream, nothing is retried and the next requests go to the other replica", async () => {
  await withGateway(
    [
      { model: "demo", env: { FAKE_ENGINE_TOKEN_DELAY_MS: "200", FAKE_ENGINE_TOKENS: "50" } },
      { model: "demo" },
    ],
    ([a, b], table) => table.setEndpoints([a.spec("dies"), b.spec("lives")]),
    // The first draw picks the first endpoint: the stream starts on "dies".
    { random: () => 0 },
    async (gw, [dying], table) => {
      const r = await post(gw, "/v1/chat/completions", chat("demo", true));
      const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = (await reader.read()).value ?? "";
      const [dies, lives] = table.all();
      assertEquals([dies.dispatched, lives.dispatched], [1, 0]);
      dying.kill();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += value;
      }
      assertStringIncludes(text, "upstream_stream_error");
      assertEquals(lives.dispatched, 0, "bytes were sent: the request was not retried elsewhere");
      for (let i = 0; i < 4; i++) {
        const next = await post(gw, "/v1/chat/completions", chat("demo"));
        assertEquals(next.status, 200);
        await next.body?.cancel();
      }
      assertEquals([dies.dispatched, lives.dispatched], [1, 4], "the suspect gets nothing");
    },
  );
});

Deno.test("gateway: a client disconnect cancels the upstream request", async () => {
  await withGateway(
    [{ model: "demo", env: { FAKE_ENGINE_TOKEN_DELAY_MS: "200", FAKE_ENGINE_TOKENS: "50" } }],
    ([a], table) => table.setEndpoints([a.spec("r1")]),
    {},
    async (gw, [engine], table) => {
      const ac = new AbortController();
      const r = await post(gw, "/v1/chat/completions", chat("demo", true), { signal: ac.signal });
      const reader = r.body!.getReader();
      await reader.read();
      assertEquals(await engine.running(), 1);
      ac.abort();
      await reader.cancel().catch(() => {});
      await until(
        "the engine's running count back to 0",
        async () => (await engine.running()) === 0,
      );
      await until("outstanding back to 0", () => table.all()[0].outstanding === 0);
      assertEquals(table.all()[0].suspectSince, null, "a client leaving is not the engine's fault");
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

Deno.test("gateway: a whole answer broken off mid-body is a 502 and the replica turns suspect", async () => {
  // A raw engine stand-in: promises 100 bytes, sends 10, hangs up.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const serving = (async () => {
    for await (const conn of listener) {
      conns.push(conn);
      await conn.read(new Uint8Array(65536));
      await conn.write(
        new TextEncoder().encode(
          "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n" +
            '{"id":"x",',
        ),
      );
      conn.close();
    }
  })().catch(() => {});
  const table = new EndpointTable();
  table.setEndpoints([{
    model: "m",
    replica_id: "r",
    url: `http://127.0.0.1:${listener.addr.port}`,
  }]);
  const gw = startGateway(table, { hostname: "127.0.0.1", port: 0 });
  try {
    const r = await post(gw, "/v1/chat/completions", { model: "m", messages: [] });
    assertEquals(r.status, 502);
    assertEquals((await r.json()).error.code, "upstream_error");
    assertOk(table.all()[0].suspectSince !== null);
    // Counted as a broken answer, not as an unreachable replica.
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    assertStringIncludes(
      metrics,
      'llmgw_gateway_requests_total{model="m",outcome="mid_stream_failure"} 1',
    );
    assertOk(!metrics.includes('outcome="upstream_unreachable"'));
  } finally {
    await gw.close();
    listener.close();
    await serving;
    for (const c of conns) {
      try {
        c.close();
      } catch {
        // Closed above.
      }
    }
  }
});

Deno.test("gateway: an engine proxy running no engine of the shard (a scale-down not yet heard of) is retried on another", async () => {
  // A node's engine proxy whose shard was stopped: its own refusal, marked as such.
  const proxy = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      Response.json({ error: { code: "unknown_shard", message: "no engine" } }, {
        status: 404,
        headers: { "x-llmgw-proxy-refused": "unknown_shard" },
      }),
  );
  try {
    const stopped = {
      model: "demo",
      replica_id: "stopped",
      url: `http://127.0.0.1:${proxy.addr.port}`,
      shard: "demo-r1.1/0",
    };
    await withGateway(
      [{ model: "demo" }],
      ([a], table) => table.setEndpoints([stopped, a.spec("r0")]),
      { random: () => 0 },
      async (gw, _engines, table) => {
        const r = await post(gw, "/v1/chat/completions", chat("demo"));
        assertEquals(r.status, 200);
        await r.body?.cancel();
        const [gone, live] = table.all();
        assertEquals([gone.dispatched, live.dispatched], [1, 1]);
        assertOk(gone.suspectSince !== null, "the refusing endpoint is suspect");
      },
    );
  } finally {
    await proxy.shutdown();
  }
});

/** The value of one sample of a gateway metric, or undefined. */
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
