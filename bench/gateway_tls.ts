/**
 * What TLS on the gateway's own listener costs (design §11.2, §16): the same
 * gateway over an instant upstream, served plain (`Deno.serve`) and over TLS
 * (`node:https`, which renews certificates without a restart), with 64
 * clients in a process of their own, non-streaming and streaming chat
 * completions, in one invocation.
 *
 * Run: `deno run -A bench/gateway_tls.ts [SECONDS]`.
 */
import { EndpointTable } from "../gateway/endpoints.ts";
import { startGateway, startGatewayTls } from "../gateway/server.ts";
import { CertificateAuthority } from "../tls/authority.ts";

const SECONDS = Deno.args[0] ?? "5";
const CLIENTS = new URL("./load_clients.ts", import.meta.url).pathname;
const INSTANT = new URL("./instant_upstream.ts", import.meta.url).pathname;

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

const upstreamPort = freePort();
const upstream = new Deno.Command(Deno.execPath(), {
  args: ["run", "-A", INSTANT, String(upstreamPort)],
  stdout: "null",
  stderr: "inherit",
}).spawn();
const dir = await Deno.makeTempDir({ prefix: "llmgw_gw_tls_bench_" });
try {
  for (let i = 0; i < 50; i++) {
    try {
      (await fetch(`http://127.0.0.1:${upstreamPort}/v1/models`)).body?.cancel();
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const now = Date.now();
  const { ca } = await CertificateAuthority.create({ now, lifetimeMs: 86_400_000 });
  const serving = await ca.issueWithKey({
    commonName: "gateway",
    ipAddresses: ["127.0.0.1"],
    use: "server",
    now,
    lifetimeMs: 86_400_000,
  });
  const caFile = `${dir}/ca.crt`;
  Deno.writeTextFileSync(caFile, ca.certPem);
  const table = new EndpointTable();
  table.setEndpoints([{
    model: "bench",
    replica_id: "bench-r0",
    url: `http://127.0.0.1:${upstreamPort}`,
  }], ["bench"]);
  const plain = startGateway(table, { hostname: "127.0.0.1", port: 0 });
  const tls = await startGatewayTls(table, {
    hostname: "127.0.0.1",
    port: 0,
    tls: { source: { what: "bench", load: () => Promise.resolve(serving) } },
  });
  const chat = (stream: boolean) =>
    JSON.stringify({ model: "bench", messages: [{ role: "user", content: "hi" }], stream });
  console.log("| request | plain req/s | TLS req/s | TLS/plain |");
  console.log("| --- | --- | --- | --- |");
  for (
    const [name, body] of [["chat, non-streaming", chat(false)], ["chat, streaming", chat(true)]]
  ) {
    const rate = async (base: string, ca: string) => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", CLIENTS, `${base}/v1/chat/completions`, ca, body, "64", SECONDS],
        stdout: "piped",
        stderr: "inherit",
      }).output();
      const r = JSON.parse(new TextDecoder().decode(out.stdout));
      if (r.failed > 0) throw new Error(`${name} via ${base}: ${r.failed} failed`);
      return r.ok / r.seconds;
    };
    const p = await rate(plain.url, "-");
    const t = await rate(tls.url, caFile);
    console.log(`| ${name} | ${p.toFixed(0)} | ${t.toFixed(0)} | ${(t / p).toFixed(2)} |`);
  }
  await plain.close();
  await tls.close();
} finally {
  upstream.kill("SIGTERM");
  await upstream.status;
  await Deno.remove(dir, { recursive: true });
}
