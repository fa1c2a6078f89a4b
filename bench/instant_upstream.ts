/**
 * An upstream that answers at once, for measuring a proxy's own added
 * latency (bench/gateway_vs_nginx.sh): a fixed chat completion, or with
 * `"stream": true` in the body two SSE events, with no generation time.
 *
 * Run: `deno run -A bench/instant_upstream.ts PORT`.
 */
const enc = new TextEncoder();
const answer = '{"id":"c","object":"chat.completion","choices":[{"index":0,"message":' +
  '{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}';
const events = [
  'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n',
  "data: [DONE]\n\n",
].map((e) => enc.encode(e));

Deno.serve({ hostname: "127.0.0.1", port: Number(Deno.args[0]), onListen() {} }, async (req) => {
  if (req.method === "GET") return Response.json({ object: "list", data: [{ id: "bench" }] });
  const body = await req.text();
  if (!body.includes('"stream":true')) {
    return new Response(answer, { headers: { "content-type": "application/json" } });
  }
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      for (const e of events) c.enqueue(e);
      c.close();
    },
  });
  return new Response(stream, { headers: { "content-type": "text/event-stream" } });
});
