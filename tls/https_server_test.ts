/**
 * When {@link serveHttps} sends a streamed answer's head: peer bytes
 * (`application/octet-stream`) at once, before their first byte, so an
 * asker knows it is served while the chunk is still being written; a
 * server-sent-event answer only with its first byte, so one whose body
 * fails before any byte (an engine dying in prefill, behind the agent's
 * engine proxy) gives no head at all and the gateway retries another
 * replica. The server is shut in a `finally`.
 */
import { assertEquals, assertRejects } from "../tests/assert.ts";
import { clusterPki } from "../tests/cluster_pki.ts";
import { type HttpsHandler, serveHttps } from "./https_server.ts";
import { pinnedFetch } from "./trust.ts";

/** The longest a test waits for one step before it fails. */
const BOUND_MS = 20_000;

/** `work`, or an error once {@link BOUND_MS} pass first. */
async function bounded<T>(work: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`nothing for ${BOUND_MS} ms`)), BOUND_MS);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function withServer(
  handler: HttpsHandler,
  body: (url: string, fetch: typeof globalThis.fetch) => Promise<void>,
): Promise<void> {
  const p = await clusterPki();
  const server = await serveHttps({ hostname: "127.0.0.1", port: 0, ...p.server }, handler);
  const http = pinnedFetch(p.caPem);
  try {
    await body(`https://127.0.0.1:${server.addr.port}/`, http.fetch);
  } finally {
    http.close();
    await server.shutdown(0);
  }
}

/** A body whose first byte is held until `release` is called (or fails with `fail`). */
function heldBody() {
  let release!: () => void;
  let fail!: (e: Error) => void;
  const gate = new Promise<void>((resolve, reject) => {
    release = resolve;
    fail = reject;
  });
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      await gate;
      controller.enqueue(new TextEncoder().encode("bytes"));
      controller.close();
    },
  }, { highWaterMark: 0 });
  return { body, release, fail };
}

Deno.test("serveHttps: peer bytes' head arrives before their first byte", async () => {
  const held = heldBody();
  await withServer(
    () => new Response(held.body, { headers: { "content-type": "application/octet-stream" } }),
    async (url, fetch) => {
      try {
        // The byte is released only once the head came: without the flush this waits forever.
        const res = await bounded(fetch(url));
        assertEquals(res.status, 200);
        held.release();
        assertEquals(await bounded(res.text()), "bytes");
      } finally {
        held.release();
      }
    },
  );
});

Deno.test("serveHttps: an event stream failing before its first byte gives no head", async () => {
  const held = heldBody();
  let served!: () => void;
  const handled = new Promise<void>((resolve) => served = resolve);
  await withServer(
    () => {
      served();
      return new Response(held.body, { headers: { "content-type": "text/event-stream" } });
    },
    async (url, fetch) => {
      const asked = fetch(url);
      await bounded(handled);
      // Failed before any byte, as an engine dying during prefill: the connection is cut with
      // no head, which the gateway reads as unreachable and retries elsewhere.
      held.fail(new Error("engine died"));
      await assertRejects(() => bounded(asked), TypeError);
    },
  );
});

Deno.test("serveHttps: an event stream's head comes with its first byte", async () => {
  const held = heldBody();
  await withServer(
    () => new Response(held.body, { headers: { "content-type": "text/event-stream" } }),
    async (url, fetch) => {
      const asked = fetch(url);
      held.release();
      const res = await bounded(asked);
      assertEquals(res.status, 200);
      assertEquals(await bounded(res.text()), "bytes");
    },
  );
});
