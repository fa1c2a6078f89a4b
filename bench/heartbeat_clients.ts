/**
 * The client side of bench/heartbeat_load.ts, in a process of its own so the
 * control plane's CPU is measured alone: sends heartbeats for the nodes in
 * TOKENS_FILE (one `node_id token` per line) from 64 concurrent workers for
 * SECONDS, trusting CA_FILE when the URL is https, and prints
 * `{"sent": N, "failed": N, "seconds": S}`.
 *
 * With SECONDS `once`, sends one heartbeat per node and stops: the warm-up
 * before a measurement of the steady state (every node's first heartbeat
 * after registration may change its liveness, which writes an event).
 *
 * Run by heartbeat_load.ts: `deno run -A bench/heartbeat_clients.ts URL CA_FILE|- TOKENS_FILE SECONDS|once`.
 */
import { pinnedFetch } from "../tls/trust.ts";

const [url, caFile, tokensFile, secondsText] = Deno.args;
const nodes = Deno.readTextFileSync(tokensFile).trim().split("\n").map((l) => l.split(" "));
const client = caFile === "-" ? null : pinnedFetch(Deno.readTextFileSync(caFile));
const send = client?.fetch ?? fetch;
const CONCURRENCY = 64;
let sent = 0;
let failed = 0;
const once = secondsText === "once";
const deadline = performance.now() + (once ? 3_600_000 : Number(secondsText) * 1000);
const t0 = performance.now();
await Promise.all(Array.from({ length: CONCURRENCY }, async (_, worker) => {
  for (
    let i = worker;
    performance.now() < deadline && (!once || i < nodes.length);
    i += CONCURRENCY
  ) {
    const [nodeId, token] = nodes[i % nodes.length];
    const res = await send(`${url}/v1/agent/heartbeat`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ node_id: nodeId, generation: 0, shards: [] }),
    });
    await res.body?.cancel();
    if (res.ok) sent++;
    else failed++;
  }
}));
client?.close();
console.log(JSON.stringify({ sent, failed, seconds: (performance.now() - t0) / 1000 }));
