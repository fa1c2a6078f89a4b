/**
 * The floor under the gateway's memory per open stream (bench/gateway_streams.ts):
 * a bare `Deno.serve` server, no framework, that answers every POST with an
 * SSE stream writing one small chunk (the size of an engine's token event)
 * every 100 ms until the client goes away; a GET answers a model list, so
 * the bench's readiness check works unchanged.
 *
 * Run: `deno run -A bench/minimal_stream_server.ts PORT` (with
 * `--v8-flags=--expose-gc`, SIGUSR2 collects its garbage: bench/gc_on_signal.ts).
 */
import "./gc_on_signal.ts";

const enc = new TextEncoder();
const event = enc.encode(
  'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"bench",' +
    '"choices":[{"index":0,"delta":{"content":"tok"},"logprobs":null,"finish_reason":null}]}\n\n',
);
const TICK_MS = 100;

Deno.serve({ hostname: "127.0.0.1", port: Number(Deno.args[0]), onListen() {} }, async (req) => {
  if (req.method === "GET") return Response.json({ object: "list", data: [{ id: "bench" }] });
  await req.body?.cancel();
  let timer: ReturnType<typeof setInterval> | undefined;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(event);
      timer = setInterval(() => c.enqueue(event), TICK_MS);
    },
    cancel() {
      clearInterval(timer);
    },
  });
  return new Response(stream, { headers: { "content-type": "text/event-stream" } });
});
