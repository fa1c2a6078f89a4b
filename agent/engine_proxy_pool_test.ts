import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { engineProxy, SHARD_HEADER } from "./engine_proxy.ts";

const TOKEN = "llmgw_proxy_0123456789abcdef0123456789";
/** The engine's keep-alive timeout here (uvicorn's is 5 s). */
const KEEP_ALIVE_MS = 100;

/**
 * An engine that answers each request on a keep-alive connection, and closes
 * a connection idle for {@link KEEP_ALIVE_MS} or more exactly when the next
 * request arrives on it, unanswered: uvicorn's idle timer firing as a reused
 * connection's request crosses it, made certain instead of a matter of luck.
 */
function crossingEngine() {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  const seen = { connections: 0, answered: 0, closedOnArrival: 0 };
  const serveConn = async (c: Deno.Conn) => {
    const buf = new Uint8Array(16 * 1024);
    let pending = "";
    let idleSince: number | null = null;
    // Bounded: a test sends a few requests per connection.
    for (let i = 0; i < 100; i++) {
      const n = await c.read(buf).catch(() => null);
      if (n === null) break;
      pending += new TextDecoder().decode(buf.subarray(0, n));
      if (!requestComplete(pending)) continue;
      // The whole request came, but the idle timer had fired: closed unanswered.
      if (idleSince !== null && performance.now() - idleSince >= KEEP_ALIVE_MS) {
        seen.closedOnArrival++;
        break;
      }
      pending = "";
      const body = '{"ok":true}';
      await c.write(new TextEncoder().encode(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
      ));
      seen.answered++;
      idleSince = performance.now();
    }
    // Closed here unless stop() closed it first.
    if (conns.delete(c)) c.close();
  };
  const serving: Promise<void>[] = [];
  const accepting = (async () => {
    for await (const c of listener) {
      seen.connections++;
      conns.add(c);
      serving.push(serveConn(c));
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    seen,
    async stop() {
      listener.close();
      for (const c of conns) {
        conns.delete(c);
        c.close();
      }
      await accepting;
      await Promise.all(serving);
    },
  };
}

/** Whether `text` holds a whole request: a head and its body, sized or chunked. */
function requestComplete(text: string): boolean {
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return false;
  const head = text.slice(0, end).toLowerCase();
  const rest = text.slice(end + 4);
  if (head.includes("transfer-encoding: chunked")) return rest.endsWith("0\r\n\r\n");
  const length = /content-length: *(\d+)/.exec(head);
  return rest.length >= (length === null ? 0 : Number(length[1]));
}

Deno.test("engine proxy: a connection idle past the engine's keep-alive is not reused, so a POST is not lost as it crosses the engine's close", async () => {
  const engine = crossingEngine();
  try {
    const proxy = engineProxy({
      token: TOKEN,
      target: () => ({ port: engine.port, key: null }),
      poolIdleMs: KEEP_ALIVE_MS / 2,
    });
    const chat = () =>
      proxy(
        new Request("http://agent:9181/v1/chat/completions", {
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}`, [SHARD_HEADER]: "s1" },
          body: '{"model":"m","messages":[]}',
          signal: AbortSignal.timeout(5_000),
        }),
      );
    const first = await chat();
    assertEquals(first.status, 200, await first.clone().text());
    await first.body?.cancel();
    // The connection idles past the engine's keep-alive timeout (the condition itself, not a stand-in).
    await new Promise((r) => setTimeout(r, KEEP_ALIVE_MS + 50));
    const second = await chat();
    const text = await second.text();
    assertEquals(second.status, 200, `the second request: ${text}`);
    assertStringIncludes(text, '"ok":true');
    // With Deno's default pool (90 s) the idle connection was reused: the engine read the
    // whole POST and closed, and Deno sent it again on a fresh connection (a second
    // generation); a close that cuts the request short is "fetch failed" instead, a 502.
    assertEquals(
      engine.seen.closedOnArrival,
      0,
      "no request was sent on a connection the engine was closing",
    );
    assertEquals(engine.seen.answered, 2);
  } finally {
    await engine.stop();
  }
});

Deno.test("engine proxy: a request lost on a connection says why, without the engine's address", async () => {
  const lost = new TypeError("fetch failed", {
    cause: new Error(
      "error sending request from 127.0.0.1:43084 for http://127.0.0.1:36445/v1/chat/completions (127.0.0.1:36445): client error (SendRequest): connection closed before message completed",
    ),
  });
  const res = await engineProxy({
    token: TOKEN,
    target: () => ({ port: 36445, key: null }),
    fetch: () => Promise.reject(lost),
  })(
    new Request("http://agent/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, [SHARD_HEADER]: "s1" },
      body: "{}",
    }),
  );
  assertEquals(res.status, 502);
  const body = await res.json();
  assertEquals(body.error.code, "engine_unreachable");
  assertEquals(
    body.error.message,
    "the engine of shard s1 did not answer: fetch failed: client error (SendRequest): connection closed before message completed",
  );
});
