/**
 * The gateway's request pipeline (design §12) against a fake dispatch: no
 * sockets, no engines. Each case checks the client's answer and that the
 * request's record counted it exactly once: one request by outcome, no
 * attempt left in flight, tokens added once.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import type { BodyReader } from "../http/read_limited.ts";
import { ApiKeyTable } from "./api_keys.ts";
import { createGateway, type GatewayOptions } from "./app.ts";
import type { Answered, Dispatch } from "./dispatch.ts";
import { EndpointTable } from "./endpoints.ts";
import { GatewayMetrics } from "./metrics.ts";

const enc = new TextEncoder();

/** A body reader yielding `chunks`, then failing when `fail`, else ending. */
function reader(chunks: string[], fail = false): BodyReader & { cancelled: boolean } {
  let i = 0;
  return {
    cancelled: false,
    read() {
      if (i < chunks.length) {
        return Promise.resolve({ done: false, value: enc.encode(chunks[i++]) });
      }
      if (fail) return Promise.reject(new Error("connection reset"));
      return Promise.resolve({ done: true, value: undefined });
    },
    cancel() {
      this.cancelled = true;
      return Promise.resolve();
    },
  };
}

/** An engine's answer, as the upstream client gives it. */
interface Scripted {
  status?: number;
  headers?: Record<string, string>;
  body?: BodyReader | null;
}

/** A gateway over one ready replica `m-r0` of `m` (and a known, idle `idle`), whose dispatch answers `script`. */
function setup(script: Scripted | Error | Response, options: GatewayOptions = {}) {
  const table = new EndpointTable();
  table.setEndpoints([{ model: "m", replica_id: "m-r0", url: "http://engine" }], ["m", "idle"]);
  const metrics = new GatewayMetrics();
  const seen = { dispatched: 0, brokeOff: [] as (string | undefined)[], target: "" };
  const dispatch: Dispatch = (r, record) => {
    seen.dispatched++;
    seen.target = r.target;
    const e = table.choose(r.model)!;
    record.attempt(e.replica_id, table.acquire(e));
    if (script instanceof Error) return Promise.reject(script);
    if (script instanceof Response) {
      record.finish("upstream_error");
      return Promise.resolve(script);
    }
    const answered: Answered = {
      upstream: {
        status: script.status ?? 200,
        headers: new Headers(script.headers ?? {}),
        body: script.body === undefined ? null : script.body,
      },
      brokeOff: (why) => void seen.brokeOff.push(why),
    };
    return Promise.resolve(answered);
  };
  const gw = createGateway(table, { metrics, dispatch, ...options });
  const post = async (body: BodyInit, path = "/v1/chat/completions"): Promise<Response> =>
    await gw.fetch(new Request(`http://gw${path}`, { method: "POST", body }));
  const chat = (model = "m", stream = false) => post(JSON.stringify({ model, stream }));
  /** Every request counter and in-flight gauge, and the table's outstanding count. */
  const counted = () => {
    const text = metrics.render();
    const lines = text.split("\n").filter((l) =>
      /^llmgw_gateway_(requests_total|inflight_requests|tokens_total|replica_requests_total|time_to_first_token_seconds_count)\{/
        .test(l)
    );
    return { lines, outstanding: table.all()[0].outstanding };
  };
  return { gw, table, seen, post, chat, counted };
}

const ok = (model: string, outcome: string) =>
  `llmgw_gateway_requests_total{model="${model}",outcome="${outcome}"} 1`;

Deno.test("refusals before dispatch: each answered and counted once, no replica tried", async () => {
  const cases: [string, () => Promise<Response>, number, string, string][] = [];
  const s = setup({ body: null });
  cases.push(["not JSON", () => s.post("{"), 400, "invalid_json", ""]);
  cases.push(["not an object", () => s.post("[1]"), 400, "invalid_json", ""]);
  cases.push(["no model", () => s.post('{"model": ""}'), 400, "missing_model", ""]);
  cases.push(["unknown model", () => s.chat("nope"), 404, "model_not_found", ""]);
  cases.push(["no ready replica", () => s.chat("idle"), 503, "model_not_ready", "idle"]);
  for (const [what, send, status, code, model] of cases) {
    const before = s.counted().lines;
    const res = await send();
    assertEquals(res.status, status, what);
    assertEquals((await res.json()).error.code, code, what);
    const added = s.counted().lines.filter((l) => !before.includes(l));
    assertEquals(added.length, 1, `${what}: one new counter: ${added}`);
    assertOk(added[0].startsWith(`llmgw_gateway_requests_total{model="${model}"`), added[0]);
  }
  assertEquals(s.seen.dispatched, 0);
  assertEquals(s.counted().outstanding, 0);
  // A made-up model name never becomes a label.
  assertOk(!s.counted().lines.some((l) => l.includes("nope")));
});

Deno.test("a body over the limit is a 413, declared or streamed", async () => {
  const s = setup({ body: null }, { maxBodyBytes: 64 });
  const big = JSON.stringify({ model: "m", pad: "x".repeat(100) });
  const declared = await s.post(big);
  assertEquals([declared.status, (await declared.json()).error.code], [413, "request_too_large"]);
  const streamed = await s.post(
    new ReadableStream({
      start(c) {
        c.enqueue(enc.encode(big));
        c.close();
      },
    }),
  );
  assertEquals(streamed.status, 413);
  await streamed.body?.cancel();
  assertStringIncludes(s.counted().lines.join("\n"), 'outcome="bad_request"} 2');
  assertEquals(s.seen.dispatched, 0);
});

Deno.test("before the first sync every model is a 503; keys refuse before the body is read", async () => {
  const keys = new ApiKeyTable();
  keys.set([{ id: "k1", hash: "0".repeat(64), models: null }]);
  const s = setup({ body: null }, { keys });
  const refused = await s.chat();
  assertEquals(refused.status, 401);
  await refused.body?.cancel();
  assertOk(s.counted().lines.includes(ok("", "unauthorized")), s.counted().lines.join("\n"));

  const fresh = createGateway(new EndpointTable(), { dispatch: () => Promise.reject(new Error()) });
  const early = await fresh.fetch(
    new Request("http://gw/v1/completions", { method: "POST", body: '{"model":"m"}' }),
  );
  assertEquals([early.status, early.headers.get("retry-after")], [503, "5"]);
  await early.body?.cancel();
});

Deno.test("a whole answer: sent in one piece, its usage counted once, the attempt ended", async () => {
  const body = '{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}';
  const s = setup({
    headers: { "content-type": "application/json", "content-length": String(body.length) },
    body: reader([body.slice(0, 10), body.slice(10)]),
  });
  const res = await s.post('{"model":"m"}', "/v1/chat/completions?x=1");
  assertEquals([res.status, await res.text()], [200, body]);
  assertEquals(s.seen.target, "/v1/chat/completions?x=1");
  const { lines, outstanding } = s.counted();
  assertEquals(outstanding, 0);
  for (
    const want of [
      ok("m", "ok"),
      'llmgw_gateway_replica_requests_total{model="m",replica="m-r0",outcome="ok"} 1',
      'llmgw_gateway_inflight_requests{model="m",replica="m-r0"} 0',
      'llmgw_gateway_tokens_total{model="m",api_key="none",kind="prompt"} 7',
      'llmgw_gateway_tokens_total{model="m",api_key="none",kind="completion"} 3',
      'llmgw_gateway_time_to_first_token_seconds_count{model="m"} 1',
    ]
  ) assertOk(lines.includes(want), `${want} in:\n${lines.join("\n")}`);
});

Deno.test("a whole answer cut short is a 502; the replica turns suspect once", async () => {
  const s = setup({
    headers: { "content-length": "100" },
    body: reader(['{"choices":'], true),
  });
  const res = await s.chat();
  assertEquals([res.status, (await res.json()).error.code], [502, "upstream_error"]);
  assertEquals(s.seen.brokeOff, [undefined]);
  assertOk(s.counted().lines.includes(ok("m", "mid_stream_failure")));
  assertEquals(s.counted().outstanding, 0);
});

Deno.test("a relayed stream: counted when its body ends, with the usage of its tail", async () => {
  const events = [
    'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n',
    'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n',
    "data: [DONE]\n\n",
  ];
  const s = setup({ headers: { "content-type": "text/event-stream" }, body: reader(events) });
  const res = await s.chat("m", true);
  // Not yet: the body has not ended.
  assertOk(!s.counted().lines.some((l) => l.startsWith("llmgw_gateway_requests_total")));
  assertEquals(s.counted().outstanding, 1);
  assertEquals(await res.text(), events.join(""));
  const { lines, outstanding } = s.counted();
  assertEquals(outstanding, 0);
  assertOk(lines.includes(ok("m", "ok")));
  assertOk(lines.includes('llmgw_gateway_tokens_total{model="m",api_key="none",kind="prompt"} 5'));
});

Deno.test("a relayed stream the client cancels, or the engine breaks, is counted once", async () => {
  const cancelled = setup({
    headers: { "content-type": "text/event-stream" },
    body: reader(["data: 1\n\n", "data: 2\n\n"]),
  });
  const res = await cancelled.chat("m", true);
  const r = res.body!.getReader();
  await r.read();
  await r.cancel();
  assertOk(cancelled.counted().lines.includes(ok("m", "client_closed")));
  assertEquals(cancelled.counted().outstanding, 0);

  const broken = setup({
    headers: { "content-type": "text/event-stream" },
    body: reader(["data: 1\n\n"], true),
  });
  const text = await (await broken.chat("m", true)).text();
  assertStringIncludes(text, "upstream_stream_error");
  assertOk(broken.counted().lines.includes(ok("m", "mid_stream_failure")));
  assertEquals(broken.seen.brokeOff.length, 1);
  assertEquals(broken.counted().outstanding, 0);
});

Deno.test("a 404 on /v1/responses: no such route, the engine's own, or broken", async () => {
  const notFound = (body: BodyReader) => setup({ status: 404, body });
  const framework = notFound(reader(['{"detail":"Not Found"}']));
  const a = await framework.post('{"model":"m"}', "/v1/responses");
  assertEquals([a.status, (await a.json()).error.code], [404, "unsupported_endpoint"]);
  assertOk(framework.counted().lines.includes(ok("m", "unsupported_endpoint")));

  const own = '{"error":{"message":"no such response","type":"invalid_request_error"}}';
  const engine = notFound(reader([own]));
  const b = await engine.post('{"model":"m"}', "/v1/responses");
  assertEquals([b.status, await b.text()], [404, own]);

  const long = reader(["x".repeat(40 * 1024), "y".repeat(40 * 1024)]);
  const tooLong = notFound(long);
  const c = await tooLong.post('{"model":"m"}', "/v1/responses");
  assertEquals(c.status, 502);
  await c.body?.cancel();
  assertOk(long.cancelled, "the rest of a too long 404 is not read");
  assertEquals(tooLong.counted().outstanding, 0);
});

Deno.test("an empty answer passes through; a dispatch that throws is a 500 that ends its attempt", async () => {
  const empty = setup({ status: 204, body: null });
  const res = await empty.chat();
  assertEquals([res.status, await res.text()], [204, ""]);
  assertOk(empty.counted().lines.includes(ok("m", "ok")));

  const failing = setup(new Error("a bug"));
  const lines: string[] = [];
  const gw = createGateway(failing.table, {
    metrics: new GatewayMetrics(),
    log: (l) => lines.push(l),
    dispatch: (r, record) => {
      const e = failing.table.choose(r.model)!;
      record.attempt(e.replica_id, failing.table.acquire(e));
      return Promise.reject(new Error("a bug"));
    },
  });
  const broken = await gw.fetch(
    new Request("http://gw/v1/embeddings", { method: "POST", body: '{"model":"m"}' }),
  );
  assertEquals([broken.status, (await broken.json()).error.message], [
    500,
    "internal gateway error",
  ]);
  assertEquals(failing.table.all()[0].outstanding, 0, "the attempt was released");
  assertEquals(lines, ["gateway: internal error: a bug"]);
});
