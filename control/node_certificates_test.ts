/**
 * A node certificate not renewed in time (design §11.2): one event, five sixths
 * into its life, and every node's expiry in the control plane's metrics.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { lintExposition } from "../tests/prometheus_lint.ts";
import { CertificateAuthority, newKeyPair, notAfter, notBefore } from "../tls/authority.ts";
import { ControlPlane } from "./control_plane.ts";
import { MemoryStore } from "./store/memory_store.ts";
import { HttpStats, renderMetrics } from "./metrics.ts";
import { WARN_AFTER_FRACTION } from "./node_certificates.ts";

Deno.test("a node certificate not renewed five sixths into its life is one event, and a metric", async () => {
  const clock = new FakeClock(Date.now());
  const store = new MemoryStore();
  const cp = await ControlPlane.open({ store, clock, reconcileMs: 60_000 });
  const { ca } = await CertificateAuthority.create({ now: clock.now(), lifetimeMs: 86_400_000 });
  const cert = await ca.issue({
    commonName: "node:n1",
    publicKey: (await newKeyPair()).publicKey,
    use: "server+client",
    now: clock.now(),
    lifetimeMs: 3_600_000,
  });
  cp.nodeCertificates.issued("n1", cert);
  const warnAt = notBefore(cert) + (notAfter(cert) - notBefore(cert)) * WARN_AFTER_FRACTION;
  const events = async () =>
    (await store.listEvents()).filter((e) => e.kind === "certificate_not_renewed");

  clock.advance(warnAt - clock.now() - 1);
  await cp.nodeCertificates.check("n1");
  assertEquals(await events(), [], "not yet: renewal may still come");
  clock.advance(1);
  await cp.nodeCertificates.check("n1");
  await cp.nodeCertificates.check("n1");
  const [warning, ...more] = await events();
  assertEquals(more, [], "said once per certificate");
  assertEquals(warning.subject, "node/n1");
  assertStringIncludes(warning.message, new Date(notAfter(cert)).toISOString());
  // A renewal replaces the certificate and the watch starts over.
  cp.nodeCertificates.issued("n1", cert);
  await cp.nodeCertificates.check("n1");
  assertEquals((await events()).length, 2);
  await cp.nodeCertificates.check("unknown-node");

  const text = renderMetrics(cp, new HttpStats());
  assertStringIncludes(
    text,
    `llmgw_node_certificate_expiry_timestamp_seconds{node="n1"} ${notAfter(cert) / 1000}`,
  );
  assertEquals(lintExposition(text), []);
  assertOk(
    !renderMetrics(await ControlPlane.open({ store: new MemoryStore() }), new HttpStats())
      .includes("certificate_expiry"),
    "no series without certificates",
  );
});
