/**
 * The engine proxy's listener as a stopping agent shuts it (design §9.2,
 * issue #23 item 4): new connections are refused at once, a request in
 * flight is answered whole, and a stream that outlasts the drain does not
 * keep the agent from exiting. The engines are loopback servers the test shuts down.
 * Also AgentListeners, which holds both listeners and shuts them together.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { AgentListeners, serveEngineProxy } from "./agent_listeners.ts";
import { createLogger } from "../log/log.ts";
import { SHARD_HEADER } from "./engine_proxy.ts";

const TOKEN = "llmgw_proxy_drain-test-0123456789abcdef";

/** Serves the proxy on a free loopback port, plain HTTP, in front of the engine on `enginePort`. */
async function proxyFor(enginePort: number, drainMs: number, lines: string[]) {
  return await serveEngineProxy(
    { token: TOKEN, target: (id) => id === "s1" ? { port: enginePort, key: null } : null },
    {
      listen: { hostname: "127.0.0.1", port: 0 },
      mgmtAddr: "127.0.0.1",
      tls: null,
      log: createLogger("agent", (l) => lines.push(l)),
    },
    drainMs,
  );
}

function call(url: string): Promise<Response> {
  return fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, [SHARD_HEADER]: "s1" },
    body: "{}",
  });
}

/** Resolves with "hung" if `p` has not settled within `ms`: a bound, so a broken drain fails rather than hangs. */
function within<T>(p: Promise<T>, ms: number): Promise<T | "hung"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hung = new Promise<"hung">((r) => timer = setTimeout(() => r("hung"), ms));
  return Promise.race([p, hung]).finally(() => clearTimeout(timer));
}

Deno.test("a stopping agent's engine proxy refuses new connections and answers the request in flight", async () => {
  let release: () => void = () => {};
  const held = new Promise<void>((r) => release = r);
  let arrived: () => void = () => {};
  const inFlight = new Promise<void>((r) => arrived = r);
  const engine = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async () => {
    arrived();
    await held;
    return Response.json({ text: "whole answer" });
  });
  const lines: string[] = [];
  const proxy = await proxyFor(engine.addr.port, 10_000, lines);
  try {
    const answer = call(proxy.url);
    await inFlight;
    const stopping = proxy.server.shutdown();
    // Stopped accepting at once: a new connection is refused (gateways then hold or reroute).
    const refused = await fetch(`${proxy.url}/health`).then(
      async (r) => (await r.body?.cancel(), `answered ${r.status}`),
      () => "refused",
    );
    assertEquals(refused, "refused");
    release();
    const r = await answer;
    assertEquals([r.status, await r.json()], [200, { text: "whole answer" }]);
    assertOk(await within(stopping, 10_000) !== "hung", "the drain ended once the answer was sent");
    assertEquals(lines.filter((l) => l.includes("cutting")), []);
  } finally {
    release();
    await engine.shutdown();
  }
});

Deno.test("a stream outlasting the drain does not hold a stopping agent past the drain", async () => {
  const encoder = new TextEncoder();
  const timers = new Set<ReturnType<typeof setInterval>>();
  const engine = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        const t = setInterval(() => {
          try {
            c.enqueue(encoder.encode("data: {}\n\n"));
          } catch {
            clearInterval(t);
            timers.delete(t);
          }
        }, 20);
        timers.add(t);
      },
      cancel() {
        for (const t of timers) clearInterval(t);
        timers.clear();
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
  const lines: string[] = [];
  const proxy = await proxyFor(engine.addr.port, 200, lines);
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  try {
    const r = await call(proxy.url);
    assertEquals(r.status, 200);
    reader = r.body!.getReader();
    await reader.read();
    const stopped = await within(proxy.server.shutdown(), 10_000);
    assertOk(stopped !== "hung", "shutdown returned after the drain");
    // The agent's process exits next, which ends the stream; it ran until then.
    assertOk(!(await reader.read()).done, "the stream was still running at the drain's end");
    assertEquals(lines.filter((l) => l.includes("not waiting")).length, 1);
  } finally {
    // The client leaves: the proxy's relay, then the engine's stream, end.
    await reader?.cancel().catch(() => {});
    for (const t of timers) clearInterval(t);
    // Bounded too: a relay that never ended would keep the engine's connection open.
    await within(engine.shutdown(), 5_000);
  }
});

Deno.test("AgentListeners shuts both listeners down together and forgets them", async () => {
  const lines: string[] = [];
  const held = new AgentListeners();
  // Two proxies stand in for the local API and the engine proxy: shutdown treats both alike.
  held.localApi = await proxyFor(1, 1_000, lines);
  held.proxy = await proxyFor(1, 1_000, lines);
  const urls = [held.localApi.url, held.proxy.url];
  try {
    assertOk(await within(held.shutdown(), 10_000) !== "hung", "shutdown returned");
    assertEquals([held.localApi, held.proxy], [null, null]);
    for (const url of urls) {
      const refused = await fetch(`${url}/health`).then(
        async (r) => (await r.body?.cancel(), `answered ${r.status}`),
        () => "refused",
      );
      assertEquals(refused, "refused", url);
    }
  } finally {
    await within(held.shutdown(), 10_000);
  }
});
