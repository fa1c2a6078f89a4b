/**
 * A load generator in a process of its own, so the server's CPU is measured
 * alone: `deno run -A bench/load_clients.ts URL CA_FILE|- BODY|- CONCURRENCY SECONDS`
 * POSTs BODY (JSON text; `-` for a GET) to URL from CONCURRENCY workers for
 * SECONDS, reading every answer whole, trusting CA_FILE for https, and prints
 * `{"ok": N, "failed": N, "seconds": S}`.
 */
import { pinnedFetch } from "../tls/trust.ts";

const [url, caFile, body, concurrency, seconds] = Deno.args;
const client = caFile === "-" ? null : pinnedFetch(Deno.readTextFileSync(caFile));
const send = client?.fetch ?? fetch;
let ok = 0;
let failed = 0;
const deadline = performance.now() + Number(seconds) * 1000;
const t0 = performance.now();
await Promise.all(Array.from({ length: Number(concurrency) }, async () => {
  while (performance.now() < deadline) {
    const res = await send(
      url,
      body === "-" ? {} : {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      },
    );
    await res.arrayBuffer();
    if (res.ok) ok++;
    else failed++;
  }
}));
client?.close();
console.log(JSON.stringify({ ok, failed, seconds: (performance.now() - t0) / 1000 }));
