/**
 * Certificates renewed without a restart: a gateway serving from files picks
 * up rewritten files at its next check, and an issued certificate is renewed
 * two thirds into its life (a fake clock).
 */
import tls from "node:tls";
import { join } from "node:path";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { until } from "../tests/until.ts";
import { EndpointTable } from "../gateway/endpoints.ts";
import { startGatewayTls } from "../gateway/server.ts";
import { CertificateAuthority, readCertificate } from "./authority.ts";
import {
  fileCertificate,
  issuedCertificate,
  renewalDueAt,
  watchCertificate,
} from "./certificate_source.ts";

/** The serial of the certificate a TLS server presents now. */
function servedSerial(port: number, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: "127.0.0.1", port, ca, servername: "localhost" }, () => {
      const serial = socket.getPeerCertificate().serialNumber;
      socket.end();
      resolve(serial.toLowerCase());
    });
    socket.on("error", reject);
  });
}

async function issuer() {
  const now = Date.now();
  const { ca } = await CertificateAuthority.create({ now, lifetimeMs: 86_400_000 });
  const issue = () =>
    ca.issueWithKey({
      commonName: "gateway",
      dnsNames: ["localhost"],
      ipAddresses: ["127.0.0.1"],
      use: "server",
      now: Date.now(),
      lifetimeMs: 3_600_000,
    });
  return { ca, issue };
}

Deno.test("a gateway serving from files swaps in rewritten files without a restart", async () => {
  const { ca, issue } = await issuer();
  const dir = await Deno.makeTempDir({ prefix: "llmgw_cert_files_" });
  const [certFile, keyFile] = [join(dir, "gw.crt"), join(dir, "gw.key")];
  const write = async () => {
    const c = await issue();
    Deno.writeTextFileSync(certFile, c.cert);
    Deno.writeTextFileSync(keyFile, c.key);
    return readCertificate(c.cert, "test").serialNumber.toLowerCase().replace(/^0+/, "");
  };
  const first = await write();
  const problems: string[] = [];
  const gw = await startGatewayTls(new EndpointTable(), {
    hostname: "127.0.0.1",
    port: 0,
    tls: { source: fileCertificate(certFile, keyFile), checkMs: 20, log: (l) => problems.push(l) },
  });
  try {
    assertOk(gw.url.startsWith("https://127.0.0.1:"), gw.url);
    const port = Number(new URL(gw.url).port);
    const strip = (s: string) => s.replace(/^0+/, "");
    assertEquals(strip(await servedSerial(port, ca.certPem)), first);
    // A broken rewrite is reported and the old certificate stays.
    Deno.writeTextFileSync(certFile, "not a certificate");
    await until("the bad file reported", () => problems.length > 0);
    assertEquals(strip(await servedSerial(port, ca.certPem)), first);
    const second = await write();
    await until(
      "the new certificate served",
      async () => strip(await servedSerial(port, ca.certPem)) === second,
    );
    assertOk(problems[0].includes(certFile), problems[0]);
  } finally {
    await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an issued certificate is kept until two thirds of its life, then issued anew", async () => {
  const { issue } = await issuer();
  let now = Date.now();
  let issued = 0;
  const source = issuedCertificate("test CA", () => {
    issued++;
    return issue();
  }, () => now);
  const a = await source.load();
  assertEquals((await source.load()).cert, a.cert);
  now = renewalDueAt(a.cert) - 1;
  assertEquals((await source.load()).cert, a.cert);
  now = renewalDueAt(a.cert);
  const b = await source.load();
  assertOk(b.cert !== a.cert);
  assertEquals(issued, 2);
  // The watcher swaps only what changed: with the clock before b's renewal, none.
  now = Date.now();
  let loads = 0;
  const counted = { what: source.what, load: () => (loads++, source.load()) };
  const swaps: string[] = [];
  const stop = watchCertificate(counted, b, 10, (c) => swaps.push(c.cert), () => {});
  try {
    await until("five checks", () => loads >= 5);
    assertEquals(swaps, []);
    assertEquals(issued, 2);
  } finally {
    stop();
  }
});
