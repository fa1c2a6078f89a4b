/**
 * Tests of the fake engine's HTTP server (dev/fake_engine/fake_engine_uvicorn.ts):
 * uvicorn's keep-alive timeout seen by a raw TCP client, in process and
 * through the shims (`VLLM_HTTP_TIMEOUT_KEEP_ALIVE`, `SGLANG_TIMEOUT_KEEP_ALIVE`),
 * the request-head limits of httptools and h11, and routing on the request
 * line. Nothing asserts how fast anything is: each wait has a generous bound,
 * and a connection said to stay open is checked after a sleep longer than
 * the timeout that would have closed it (sleeps only ever run long).
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { until } from "../../tests/until.ts";
import { freePortsIn, portsOf } from "../../tests/port_plan.ts";
import {
  freePort,
  POLL,
  sglangArgv,
  vllmArgv,
  withEngine,
} from "../../tests/fake_engine_harness.ts";
import {
  requestUrl,
  serveUvicorn,
  type UvicornHttp,
  type UvicornServer,
  type WebHandler,
} from "./fake_engine_uvicorn.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The longest any wait here may take before the test fails. */
const BOUND_MS = 15_000;

/** One HTTP/1.1 request's bytes, with `headers` lines after `Host`. */
function requestBytes(method: string, path: string, body = "", headers = ""): Uint8Array {
  return encoder.encode(requestText(method, path, body, headers));
}

function requestText(method: string, path: string, body = "", headers = ""): string {
  const head = `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}` +
    (body === "" ? "" : `content-type: application/json\r\ncontent-length: ${body.length}\r\n`);
  return `${head}\r\n${body}`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Whether `text` holds one whole response (a `content-length` body or a last chunk). */
function complete(text: string): boolean {
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return false;
  const head = text.slice(0, end).toLowerCase();
  const length = /\r\ncontent-length: *(\d+)/.exec(head);
  if (length !== null) return encoder.encode(text.slice(end + 4)).length >= Number(length[1]);
  if (head.includes("transfer-encoding: chunked")) return text.endsWith("0\r\n\r\n");
  return true;
}

/** What the next read on `conn` sees, within {@link BOUND_MS}: bytes, or the server's close. */
async function nextRead(conn: Deno.Conn): Promise<{ closed: true } | { text: string }> {
  const buf = new Uint8Array(65536);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`nothing read and no close within ${BOUND_MS} ms`)),
      BOUND_MS,
    );
  });
  try {
    const n = await Promise.race([conn.read(buf), timeout]);
    return n === null ? { closed: true } : { text: decoder.decode(buf.subarray(0, n)) };
  } catch (e) {
    if (e instanceof Deno.errors.ConnectionReset) return { closed: true };
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/** Sends a request on `conn` (its bytes `raw`, when given) and reads its whole response. */
async function exchange(
  conn: Deno.Conn,
  method: string,
  path: string,
  raw?: Uint8Array,
): Promise<string> {
  await conn.write(raw ?? requestBytes(method, path));
  return await response(conn);
}

/** Reads one whole response from `conn`. */
async function response(conn: Deno.Conn): Promise<string> {
  let text = "";
  for (let i = 0; i < 1000 && !complete(text); i++) {
    const r = await nextRead(conn);
    if ("closed" in r) throw new Error(`closed mid-response after ${JSON.stringify(text)}`);
    text += r.text;
  }
  assertOk(complete(text), text);
  return text;
}

/** Runs `body` against an in-process server that is always closed. */
async function withServer(
  keepAliveMs: number,
  handler: WebHandler,
  body: (port: number) => Promise<void>,
  http: UvicornHttp = "httptools",
): Promise<void> {
  let server: UvicornServer | undefined;
  const port = await new Promise<number>((resolve, reject) => {
    server = serveUvicorn({
      hostname: "127.0.0.1",
      port: 0,
      keepAliveMs,
      http,
      onListen: resolve,
      onListenError: reject,
      onError: (e) => new Response(String(e), { status: 500 }),
    }, handler);
  });
  try {
    await body(port);
  } finally {
    await server!.close();
  }
}

/** An SSE response of `events` events `gapMs` apart; `onCancel` when the client goes away. */
function slowEvents(events: number, gapMs: number, onCancel = () => {}): Response {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      timer = setInterval(() => {
        controller.enqueue(encoder.encode(`data: ${sent++}\n\n`));
        if (sent === events) {
          clearInterval(timer);
          controller.close();
        }
      }, gapMs);
    },
    cancel() {
      clearInterval(timer);
      onCancel();
    },
  });
  return new Response(body, { headers: { "content-type": "text/event-stream" } });
}

Deno.test("uvicorn server: an idle keep-alive connection is closed after its last response; one reused in time stays open, and a response longer than the timeout is not cut", async () => {
  const handler: WebHandler = (req) => {
    const path = new URL(req.url).pathname;
    return Promise.resolve(
      path === "/slow" ? slowEvents(4, 1000) : Response.json({ ok: true }, { status: 200 }),
    );
  };
  // 3 s: the second request must follow the first within it, even under load.
  await withServer(3000, handler, async (port) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      const first = await exchange(conn, "GET", "/health");
      assertStringIncludes(first, "HTTP/1.1 200 OK");
      assertStringIncludes(first.toLowerCase(), "content-length: 11");
      // Reused at once, under the timeout: the same connection answers, and a
      // stream of 4 s (longer than the 3 s timeout) runs to its end.
      const slow = await exchange(conn, "GET", "/slow");
      assertStringIncludes(slow.toLowerCase(), "transfer-encoding: chunked");
      for (const i of [0, 1, 2, 3]) assertStringIncludes(slow, `data: ${i}\n\n`);
      // Then idle: the server closes it.
      assertEquals(await nextRead(conn), { closed: true });
    } finally {
      conn.close();
    }
  });
});

Deno.test("uvicorn server: a client that goes away mid-stream cancels the stream", async () => {
  let cancelled = false;
  const handler: WebHandler = () => Promise.resolve(slowEvents(1000, 20, () => cancelled = true));
  await withServer(5000, handler, async (port) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    await conn.write(requestBytes("GET", "/stream"));
    const r = await nextRead(conn);
    assertOk("text" in r && r.text.startsWith("HTTP/1.1 200 OK"), JSON.stringify(r));
    conn.close();
    await until("the stream cancelled", () => cancelled || undefined, POLL);
  });
});

Deno.test("uvicorn server: a next request whose head arrives in pieces across the timeout is not cut (the timer stops at the first byte)", async () => {
  const handler: WebHandler = () => Promise.resolve(new Response("ok"));
  await withServer(3000, handler, async (port) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      assertStringIncludes(await exchange(conn, "GET", "/health"), "HTTP/1.1 200 OK");
      const next = requestText("GET", "/health");
      await conn.write(encoder.encode(next.slice(0, 5)));
      // Past the 3 s timeout since the response: only the first bytes keep it open.
      await sleep(4000);
      await conn.write(encoder.encode(next.slice(5)));
      assertStringIncludes(await response(conn), "HTTP/1.1 200 OK");
    } finally {
      conn.close();
    }
  });
});

Deno.test("uvicorn server: httptools takes a request head of any size; h11 refuses one past 16 KiB with uvicorn's 400 and closes", async () => {
  const handler: WebHandler = () => Promise.resolve(new Response("ok"));
  const big = (bytes: number) =>
    requestBytes("GET", "/health", "", `x-big: ${"a".repeat(bytes)}\r\n`);
  await withServer(5000, handler, async (port) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      assertStringIncludes(await exchange(conn, "GET", "", big(100_000)), "HTTP/1.1 200 OK");
      // Any other parser error gets the same answer.
      const bad = await exchange(conn, "GET", "", encoder.encode("NOT A REQUEST\r\n\r\n"));
      assertOk(bad.startsWith("HTTP/1.1 400 Bad Request\r\n"), bad);
      assertOk(bad.endsWith("\r\n\r\nInvalid HTTP request received."), bad);
      assertEquals(await nextRead(conn), { closed: true });
    } finally {
      conn.close();
    }
  }, "httptools");
  await withServer(5000, handler, async (port) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      assertStringIncludes(await exchange(conn, "GET", "", big(15_000)), "HTTP/1.1 200 OK");
      const refused = await exchange(conn, "GET", "", big(20_000));
      assertStringIncludes(refused, "HTTP/1.1 400 Bad Request");
      assertOk(refused.endsWith("\r\n\r\nInvalid HTTP request received."), refused);
      assertEquals(await nextRead(conn), { closed: true });
    } finally {
      conn.close();
    }
  }, "h11");
});

Deno.test("uvicorn server: routes on the request line's path; an odd Host is no error and //path keeps its path", async () => {
  const handler: WebHandler = (req) => Promise.resolve(new Response(new URL(req.url).pathname));
  await withServer(5000, handler, async (port) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      for (const host of ["a b", "["]) {
        const raw = encoder.encode(`GET /health HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
        const text = await exchange(conn, "GET", "", raw);
        assertStringIncludes(text, "HTTP/1.1 200 OK");
        assertOk(text.endsWith("\r\n\r\n/health"), text);
      }
      assertOk((await exchange(conn, "GET", "//v1/models")).endsWith("\r\n\r\n//v1/models"));
    } finally {
      conn.close();
    }
  });
  const cases: [string, string][] = [
    ["/v1/models?x=1", "http://localhost/v1/models?x=1"],
    ["//v1/models", "http://localhost//v1/models"],
    ["http://other:9/v1/models?x=1", "http://localhost/v1/models?x=1"],
    ["*", "http://localhost/"],
  ];
  for (const [target, url] of cases) assertEquals(requestUrl(target).href, url, target);
});

/** Starts `argv` with `env`, reads /health once on a raw connection, and runs `then` on it. */
async function afterHealth(
  argv: (port: number) => string[],
  env: Record<string, string>,
  then: (conn: Deno.Conn) => Promise<void>,
  port = freePort(),
): Promise<void> {
  await withEngine(argv(port), { FAKE_ENGINE_LOAD_SECONDS: "0", ...env }, port, async (e) => {
    await until(
      "/health 200",
      async () => (await e.request("/health"))?.status === 200 || undefined,
      POLL,
    );
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      assertStringIncludes(await exchange(conn, "GET", "/health"), "HTTP/1.1 200 OK");
      await then(conn);
    } finally {
      conn.close();
    }
  });
}

Deno.test("fake engines keep an idle keep-alive connection as long as the engine's own timeout variable says, longer or shorter than the default", async () => {
  const engines = [
    { argv: vllmArgv, key: "VLLM_HTTP_TIMEOUT_KEEP_ALIVE" },
    { argv: sglangArgv, key: "SGLANG_TIMEOUT_KEEP_ALIVE" },
  ];
  // Four engines start at once: their ports come from this file's range, not the ephemeral one
  // another file's outgoing connection may take before they bind.
  const ports = freePortsIn(portsOf(import.meta.url), 4);
  const results = await Promise.allSettled(engines.flatMap(({ argv, key }, i) => [
    // Shorter than the default: closed.
    afterHealth(argv, { [key]: "1" }, async (conn) => {
      assertEquals(await nextRead(conn), { closed: true }, key);
    }, ports[2 * i]),
    // Longer: still open past the default 5 s, which a fake that ignored the
    // variable (or did not pass it to the server) would have closed.
    afterHealth(argv, { [key]: "3600" }, async (conn) => {
      await sleep(6000);
      assertStringIncludes(await exchange(conn, "GET", "/health"), "HTTP/1.1 200 OK", key);
    }, ports[2 * i + 1]),
  ]));
  // Every engine is stopped before a failure is reported (allSettled, not all).
  for (const r of results) if (r.status === "rejected") throw r.reason;
});

Deno.test("fake vLLM: a VLLM_HTTP_TIMEOUT_KEEP_ALIVE int() cannot read fails after loading, with Python's ValueError, exit 1", async () => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_LOAD_SECONDS: "0", VLLM_HTTP_TIMEOUT_KEEP_ALIVE: "soon" },
    port,
    async (e) => {
      assertEquals((await e.exit()).code, 1);
      const error = "ValueError: invalid literal for int() with base 10: 'soon'";
      assertStringIncludes(e.err, error);
      // After loading: the API server was being started (no port ever opened).
      assertStringIncludes(e.log, "Starting vLLM API server 0 on");
      assertEquals(await e.request("/health"), null);
    },
  );
});
