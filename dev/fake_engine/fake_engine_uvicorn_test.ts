/**
 * Tests of the fake engine's HTTP server (dev/fake_engine/fake_engine_uvicorn.ts):
 * uvicorn's keep-alive timeout seen by a raw TCP client, in process and
 * through the shims (`VLLM_HTTP_TIMEOUT_KEEP_ALIVE`, `SGLANG_TIMEOUT_KEEP_ALIVE`).
 * Nothing asserts how fast anything is: each wait has a generous bound.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { until } from "../../tests/until.ts";
import {
  freePort,
  POLL,
  sglangArgv,
  vllmArgv,
  withEngine,
} from "../../tests/fake_engine_harness.ts";
import { serveUvicorn, type UvicornServer, type WebHandler } from "./fake_engine_uvicorn.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The longest any wait here may take before the test fails. */
const BOUND_MS = 15_000;

/** One HTTP/1.1 request's bytes. */
function requestBytes(method: string, path: string, body = ""): Uint8Array {
  const head = `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
    (body === "" ? "" : `content-type: application/json\r\ncontent-length: ${body.length}\r\n`);
  return encoder.encode(`${head}\r\n${body}`);
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

/** Sends a request on `conn` and reads its whole response. */
async function exchange(conn: Deno.Conn, method: string, path: string): Promise<string> {
  await conn.write(requestBytes(method, path));
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
): Promise<void> {
  let server: UvicornServer | undefined;
  const port = await new Promise<number>((resolve, reject) => {
    server = serveUvicorn({
      hostname: "127.0.0.1",
      port: 0,
      keepAliveMs,
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
      path === "/slow" ? slowEvents(3, 500) : Response.json({ ok: true }, { status: 200 }),
    );
  };
  await withServer(1000, handler, async (port) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      const first = await exchange(conn, "GET", "/health");
      assertStringIncludes(first, "HTTP/1.1 200 OK");
      assertStringIncludes(first.toLowerCase(), "content-length: 11");
      // Reused at once, under the timeout: the same connection answers, and a
      // stream of 1.5 s (longer than the 1 s timeout) runs to its end.
      const slow = await exchange(conn, "GET", "/slow");
      assertStringIncludes(slow.toLowerCase(), "transfer-encoding: chunked");
      for (const i of [0, 1, 2]) assertStringIncludes(slow, `data: ${i}\n\n`);
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

Deno.test("fake engines close an idle keep-alive connection after the engine's own timeout variable", async () => {
  const cases: { argv: (port: number) => string[]; env: Record<string, string> }[] = [
    { argv: vllmArgv, env: { VLLM_HTTP_TIMEOUT_KEEP_ALIVE: "1" } },
    { argv: sglangArgv, env: { SGLANG_TIMEOUT_KEEP_ALIVE: "1" } },
  ];
  for (const c of cases) {
    const port = freePort();
    await withEngine(c.argv(port), { FAKE_ENGINE_LOAD_SECONDS: "0", ...c.env }, port, async (e) => {
      await until(
        "/health 200",
        async () => (await e.request("/health"))?.status === 200 || undefined,
        POLL,
      );
      const conn = await Deno.connect({ hostname: "127.0.0.1", port });
      try {
        assertStringIncludes(await exchange(conn, "GET", "/health"), "HTTP/1.1 200 OK");
        assertEquals(await nextRead(conn), { closed: true }, c.argv(port)[0]);
      } finally {
        conn.close();
      }
    });
  }
});
