/**
 * Minimal proxies in front of one upstream, to measure what body handling
 * costs in Deno (docs/benchmarks.md, gateway section):
 *
 * - `fetch-native`: `fetch`, body handed to Deno natively (cannot add an
 *   SSE error event when the upstream dies);
 * - `fetch-relay`: `fetch`, body relayed by a pull-based JS stream;
 * - `own-relay`: llmgw's upstream client and relay (what the gateway does,
 *   without routing, keys or metrics).
 *
 * Run: `deno run -A bench/proxy_variants.ts MODE PORT UPSTREAM_URL`; driven
 * by bench/proxy_variants.sh.
 */
import "./gc_on_signal.ts";
import { relayBody } from "../gateway/relay.ts";
import { UpstreamClient } from "../gateway/upstream_client.ts";

const [mode, port, upstream] = Deno.args;
const client = new UpstreamClient();

async function handle(req: Request): Promise<Response> {
  const path = new URL(req.url).pathname;
  const body = new Uint8Array(await req.arrayBuffer());
  const headers = new Headers({ "content-type": "application/json" });
  if (mode === "own-relay") {
    const r = await client.request({
      origin: upstream,
      method: "POST",
      target: path,
      headers,
      body,
    });
    const out = r.body === null ? null : relayBody(r.body, { sse: true, onEnd() {} });
    return new Response(out, { status: r.status, headers: r.headers });
  }
  const r = await fetch(upstream + path, { method: "POST", headers, body });
  if (mode === "fetch-native" || r.body === null) {
    return new Response(r.body, { status: r.status, headers: r.headers });
  }
  const reader = r.body.getReader();
  return new Response(relayBody(reader, { sse: true, onEnd() {} }), {
    status: r.status,
    headers: r.headers,
  });
}

if (!["fetch-native", "fetch-relay", "own-relay"].includes(mode)) {
  console.error("usage: proxy_variants.ts fetch-native|fetch-relay|own-relay PORT UPSTREAM_URL");
  Deno.exit(2);
}
Deno.serve({ hostname: "127.0.0.1", port: Number(port), onListen() {} }, handle);
