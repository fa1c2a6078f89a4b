/**
 * The gateway's upstream client against real sockets: a Deno.serve engine
 * stand-in for the normal cases, and raw TCP servers that send exactly the
 * bytes a test needs for the broken ones.
 */
import { CertificateAuthority } from "../tls/authority.ts";
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { until } from "../tests/until.ts";
import { Http1ParseError } from "./http1_response.ts";
import type { BodyReader } from "../http/read_limited.ts";
import {
  MAX_READ_BYTES,
  MIN_READ_BYTES,
  UpstreamBodyError,
  UpstreamClient,
  type UpstreamRequest,
  UpstreamUnreachable,
} from "./upstream_client.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

async function readAll(body: BodyReader | null): Promise<string> {
  let text = "";
  if (body === null) return text;
  for (;;) {
    const r = await body.read();
    if (r.done) return text;
    text += dec.decode(r.value, { stream: true });
  }
}

const post = (origin: string, body = "{}", signal?: AbortSignal): UpstreamRequest => ({
  origin,
  method: "POST",
  target: "/v1/completions?x=1",
  headers: new Headers({ "content-type": "application/json", "x-request-id": "r1" }),
  body: enc.encode(body),
  signal,
});

/**
 * A raw TCP server: `script` gets each accepted connection (and its index).
 * `ended(i)` resolves once the script of connection `i` has returned, so a
 * test can wait for a script's own `conn.close()` to land. Every connection
 * is closed by `close()`.
 */
function rawServer(script: (conn: Deno.TcpConn, index: number) => Promise<void>) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.TcpConn[] = [];
  const tasks: Promise<void>[] = [];
  // Made on first use, by a test or by the script's end, whichever comes first.
  const ends: PromiseWithResolvers<void>[] = [];
  const end = (i: number) => ends[i] ??= Promise.withResolvers<void>();
  const accepting = (async () => {
    for await (const conn of listener) {
      const i = conns.push(conn) - 1;
      tasks.push(script(conn, i).catch(() => {}).finally(() => end(i).resolve()));
    }
  })().catch(() => {});
  return {
    origin: `http://127.0.0.1:${listener.addr.port}`,
    accepted: () => conns.length,
    ended: (i: number) => end(i).promise,
    async close() {
      listener.close();
      await accepting;
      for (const c of conns) {
        try {
          c.close();
        } catch {
          // Closed by the script.
        }
      }
      await Promise.all(tasks);
    },
  };
}

/** Reads one request (head and a Content-Length body) off a raw connection. */
async function readRequest(conn: Deno.TcpConn): Promise<string> {
  let text = "";
  const buf = new Uint8Array(4096);
  for (;;) {
    const end = text.indexOf("\r\n\r\n");
    if (end >= 0) {
      const length = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? 0);
      if (text.length >= end + 4 + length) return text;
    }
    const n = await conn.read(buf);
    if (n === null) return text;
    text += dec.decode(buf.subarray(0, n));
  }
}

const write = (conn: Deno.TcpConn, text: string) => conn.write(enc.encode(text));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("upstream client: sends the request as given and reuses the connection", async () => {
  const seen: { port: number; url: string; body: string; headers: Headers }[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req, info) => {
      seen.push({
        port: info.remoteAddr.port,
        url: req.url,
        body: await req.text(),
        headers: req.headers,
      });
      return new Response(JSON.stringify({ n: seen.length }), {
        headers: { "content-type": "application/json", "x-engine": "fake" },
      });
    },
  );
  const client = new UpstreamClient();
  try {
    const origin = `http://127.0.0.1:${server.addr.port}`;
    for (const n of [1, 2]) {
      const r = await client.request(post(origin, `{"i":${n}}`));
      assertEquals(r.status, 200);
      assertEquals(r.headers.get("x-engine"), "fake");
      assertEquals(JSON.parse(await readAll(r.body)), { n });
      assertEquals(client.idleConnections, 1);
    }
    assertEquals(seen[0].port, seen[1].port, "the second request rode the first's connection");
    assertEquals(
      new URL(seen[0].url).pathname + new URL(seen[0].url).search,
      "/v1/completions?x=1",
    );
    assertEquals(seen.map((s) => s.body), ['{"i":1}', '{"i":2}']);
    assertEquals(seen[0].headers.get("x-request-id"), "r1");
    assertEquals(seen[0].headers.get("host"), `127.0.0.1:${server.addr.port}`);
  } finally {
    client.close();
    await server.shutdown();
  }
});

Deno.test("upstream client: a streamed body arrives chunk by chunk, before it ends", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
    const body = new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(enc.encode("data: 1\n\n"));
        await gate;
        c.enqueue(enc.encode("data: [DONE]\n\n"));
        c.close();
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
  const client = new UpstreamClient();
  try {
    const r = await client.request(post(`http://127.0.0.1:${server.addr.port}`));
    const first = await r.body!.read();
    assertEquals(
      dec.decode(first.value),
      "data: 1\n\n",
      "the first event before the second exists",
    );
    release();
    assertEquals(await readAll(r.body), "data: [DONE]\n\n");
  } finally {
    client.close();
    await server.shutdown();
  }
});

Deno.test("upstream client: after a stale pooled connection it dials afresh, not another stale one", async () => {
  const server = rawServer(async (conn) => {
    await readRequest(conn);
    await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    conn.close(); // every connection is good for one answer only
  });
  const client = new UpstreamClient();
  try {
    // Two pooled connections, both closed by the engine after their answer.
    const [a, b] = await Promise.all([
      client.request(post(server.origin)),
      client.request(post(server.origin)),
    ]);
    assertEquals([await readAll(a.body), await readAll(b.body)], ["ok", "ok"]);
    assertEquals(client.idleConnections, 2);
    await Promise.all([server.ended(0), server.ended(1)]);
    assertEquals(await readAll((await client.request(post(server.origin))).body), "ok");
    assertEquals(server.accepted(), 3, "one stale try, then a fresh connection");
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("upstream client: an idle connection the engine closed is replaced, not an error", async () => {
  const server = rawServer(async (conn) => {
    await readRequest(conn);
    await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    conn.close(); // as uvicorn does after its keep-alive timeout
  });
  const client = new UpstreamClient();
  try {
    assertEquals(await readAll((await client.request(post(server.origin))).body), "ok");
    await server.ended(0);
    assertEquals(await readAll((await client.request(post(server.origin))).body), "ok");
    assertEquals(server.accepted(), 2);
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("upstream client: no answer at all is UpstreamUnreachable; a refused port too", async () => {
  const silent = rawServer(async (conn) => {
    await readRequest(conn);
    conn.close();
  });
  const closedPort = (() => {
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = l.addr.port;
    l.close();
    return port;
  })();
  const client = new UpstreamClient();
  try {
    await assertRejects(() => client.request(post(silent.origin)), UpstreamUnreachable);
    await assertRejects(
      () => client.request(post(`http://127.0.0.1:${closedPort}`)),
      UpstreamUnreachable,
      "cannot connect",
    );
    await assertRejects(
      () => client.request(post("ftp://127.0.0.1:1")),
      UpstreamUnreachable,
      "only http:// and https://",
    );
  } finally {
    client.close();
    await silent.close();
  }
});

Deno.test("upstream client: a body cut short fails the read; garbage fails the request", async () => {
  const server = rawServer(async (conn, i) => {
    await readRequest(conn);
    if (i === 0) {
      await write(
        conn,
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n9\r\ndata: 1\n\n\r\n",
      );
    } else if (i === 1) {
      await write(conn, "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc");
    } else {
      await write(conn, "SSH-2.0-OpenSSH_9.2\r\n\r\n");
    }
    conn.close();
  });
  const client = new UpstreamClient();
  try {
    const chunked = await client.request(post(server.origin));
    assertEquals(dec.decode((await chunked.body!.read()).value), "data: 1\n\n");
    await assertRejects(() => chunked.body!.read(), UpstreamBodyError, "before the body ended");
    const short = await client.request(post(server.origin));
    assertEquals(dec.decode((await short.body!.read()).value), "abc");
    await assertRejects(() => short.body!.read(), UpstreamBodyError);
    await assertRejects(() => client.request(post(server.origin)), Http1ParseError);
    assertEquals(client.idleConnections, 0);
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("upstream client: 100 Continue is skipped; a close-delimited body reads to the end", async () => {
  const server = rawServer(async (conn) => {
    await readRequest(conn);
    await write(conn, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\npart one, ");
    // Not a condition wait: the engine's pause between two writes is what is tested.
    await sleep(10);
    await write(conn, "part two");
    conn.close();
  });
  const client = new UpstreamClient();
  try {
    const r = await client.request(post(server.origin));
    assertEquals(r.status, 200);
    assertEquals(await readAll(r.body), "part one, part two");
    assertEquals(client.idleConnections, 0, "a close-delimited connection is not reused");
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("upstream client: abort before the answer, and cancel during the body, close the connection", async () => {
  const closedSeen: number[] = [];
  let requestsIn = 0;
  const server = rawServer(async (conn, i) => {
    await readRequest(conn);
    requestsIn++;
    if (i === 1) {
      await write(conn, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\na\r\n");
    }
    // Wait for the client to close its end.
    const n = await conn.read(new Uint8Array(16)).catch(() => null);
    if (n === null) closedSeen.push(i);
  });
  const client = new UpstreamClient();
  try {
    const abort = new AbortController();
    const pending = client.request(post(server.origin, "{}", abort.signal));
    await until("the first request at the engine", () => requestsIn >= 1, {
      timeoutMs: 2_000,
      intervalMs: 5,
    });
    abort.abort(new Error("client closed request"));
    await assertRejects(() => pending, Error, "client closed request");
    const r = await client.request(post(server.origin));
    assertEquals(dec.decode((await r.body!.read()).value), "a");
    await r.body!.cancel();
    await until("both connections seen closed", () => closedSeen.length >= 2, {
      timeoutMs: 2_000,
      intervalMs: 5,
    });
    assertEquals(closedSeen.sort(), [0, 1]);
    assertOk(client.idleConnections === 0);
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("upstream client: https engines are verified against the given CA only", async () => {
  const now = Date.now();
  const { ca } = await CertificateAuthority.create({ now, lifetimeMs: 86_400_000 });
  const serving = await ca.issueWithKey({
    commonName: "proxy",
    ipAddresses: ["127.0.0.1"],
    use: "server",
    now,
    lifetimeMs: 86_400_000,
  });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, cert: serving.cert, key: serving.key, onListen() {} },
    () => new Response("over tls"),
  );
  const origin = `https://127.0.0.1:${server.addr.port}`;
  const trusting = new UpstreamClient({ caCerts: [ca.certPem] });
  const system = new UpstreamClient();
  try {
    const res = await trusting.request(post(origin));
    assertEquals(res.status, 200);
    await res.body?.cancel();
    await assertRejects(() => system.request(post(origin)), UpstreamUnreachable);
  } finally {
    trusting.close();
    system.close();
    await server.shutdown();
  }
});

Deno.test("upstream client: reads start small and grow while a large body fills them", async () => {
  const size = 8 * MAX_READ_BYTES;
  const payload = "x".repeat(size);
  const server = rawServer(async (conn) => {
    await readRequest(conn);
    const bytes = enc.encode(`HTTP/1.1 200 OK\r\ncontent-length: ${size}\r\n\r\n${payload}`);
    for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
  });
  const client = new UpstreamClient();
  try {
    const res = await client.request(post(server.origin));
    // The whole answer waits in the socket: every read can fill its buffer.
    await server.ended(0);
    const sizes: number[] = [];
    let text = "";
    for (;;) {
      const r = await res.body!.read();
      if (r.done) break;
      sizes.push(r.value.length);
      text += dec.decode(r.value, { stream: true });
    }
    assertEquals(text, payload);
    assertOk(
      sizes[0] <= MIN_READ_BYTES,
      `the first body bytes came from a small read: ${sizes[0]}`,
    );
    assertEquals(Math.max(...sizes), MAX_READ_BYTES);
  } finally {
    client.close();
    await server.close();
  }
});
