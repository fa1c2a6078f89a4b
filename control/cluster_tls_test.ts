/**
 * The cluster TLS of a state directory (one call for `control serve`,
 * `control init` and `dev`) and the control plane's certificate source,
 * dated and renewed on an injected clock.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { notAfter, publicKeyHash, TlsMaterialError } from "../tls/authority.ts";
import { renewalDueAt } from "../tls/certificate_source.ts";
import { CA_LIFETIME_MS, caPaths, CERTIFICATE_LIFETIME_MS, loadClusterTls } from "./cluster_tls.ts";

Deno.test("loadClusterTls creates the CA on the first start and keeps it after", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "llmgw-cluster-tls-" });
  try {
    const clock = new FakeClock();
    const first = await loadClusterTls(dir, ["cp.example", "10.0.0.5"], clock);
    assertEquals(first.created, true);
    assertEquals(first.certPath, caPaths(dir).cert);
    assertEquals(first.tls.caHash, await publicKeyHash(Deno.readTextFileSync(caPaths(dir).cert)));
    assertEquals(notAfter(first.tls.ca.certPem), clock.now() + CA_LIFETIME_MS);
    assertEquals(Deno.statSync(caPaths(dir).key).mode! & 0o777, 0o600);
    assertEquals(first.tls.controlNames, {
      dns: ["cp.example", "localhost"],
      ips: ["10.0.0.5", "127.0.0.1", "::1"],
    });
    const again = await loadClusterTls(dir, [], clock);
    assertEquals([again.created, again.certPath, again.tls.caHash], [
      false,
      first.certPath,
      first.tls.caHash,
    ]);
    // Half a CA is refused, never replaced: a new CA would cut off every joined node.
    Deno.removeSync(caPaths(dir).key);
    const e = await assertRejects(() => loadClusterTls(dir, [], clock), TlsMaterialError);
    assertOk(e.message.includes(`${join(dir, "tls")}: ca.key is missing`), e.message);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("loadClusterTls without a directory keeps a new CA in memory", async () => {
  const loaded = await loadClusterTls(null, [], new FakeClock());
  assertEquals([loaded.created, loaded.certPath], [true, null]);
});

Deno.test("the control certificate is issued at the clock's time and renewed two thirds into its life", async () => {
  const clock = new FakeClock();
  const { tls } = await loadClusterTls(null, ["127.0.0.1"], clock);
  const source = tls.controlCertificateSource();
  const first = await source.load();
  assertEquals(notAfter(first.cert), clock.now() + CERTIFICATE_LIFETIME_MS);
  const due = renewalDueAt(first.cert);
  assertOk(due > clock.now() + CERTIFICATE_LIFETIME_MS / 2, "renewed two thirds in, not before");
  clock.advance(due - clock.now() - 1_000);
  assertEquals(await source.load(), first);
  clock.advance(1_000);
  const renewed = await source.load();
  assertOk(renewed.cert !== first.cert && renewed.key !== first.key);
  assertEquals(notAfter(renewed.cert), clock.now() + CERTIFICATE_LIFETIME_MS);
  // Each source issues its own certificate and key (the API's, the embedded gateway's).
  assertOk((await tls.controlCertificateSource().load()).key !== renewed.key);
});
