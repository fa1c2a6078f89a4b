/**
 * The agent's TLS on an injected clock: whether a stored certificate is
 * still served, and when a renewal is due (two thirds into its life).
 */
import { join } from "node:path";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { writeSecretFile } from "../http/secret_file.ts";
import { CertificateAuthority } from "../tls/authority.ts";
import { renewalDueAt } from "../tls/certificate_source.ts";
import { AgentTls, agentTlsPaths } from "./agent_tls.ts";

const LIFETIME_MS = 30 * 86_400_000;

/** A state directory holding a CA file and an agent certificate issued at `clock`'s time. */
async function stateWithCertificate(clock: FakeClock) {
  const dir = Deno.makeTempDirSync({ prefix: "llmgw-agent-tls-" });
  const { ca } = await CertificateAuthority.create({
    now: clock.now(),
    lifetimeMs: 10 * LIFETIME_MS,
  });
  const caFile = join(dir, "ca.crt");
  Deno.writeTextFileSync(caFile, ca.certPem);
  const issued = await ca.issueWithKey({
    commonName: "node:n1",
    use: "server+client",
    now: clock.now(),
    lifetimeMs: LIFETIME_MS,
  });
  const paths = agentTlsPaths(dir);
  Deno.mkdirSync(join(dir, "tls"), { recursive: true, mode: 0o700 });
  Deno.writeTextFileSync(paths.cert, issued.cert);
  writeSecretFile(paths.key, issued.key);
  return { dir, caFile, issued };
}

function prepare(dir: string, caFile: string, clock: FakeClock) {
  return AgentTls.prepare({
    stateDir: dir,
    controlUrl: "https://127.0.0.1:7070",
    joinToken: "unused: the CA file wins",
    caFile,
    log: () => {},
    clock,
  });
}

Deno.test("a stored certificate is served until the clock passes its end, renewed from two thirds in", async () => {
  const clock = new FakeClock();
  const { dir, caFile, issued } = await stateWithCertificate(clock);
  try {
    const tls = await prepare(dir, caFile, clock);
    assertOk(tls !== null);
    try {
      assertEquals(tls.serving.cert, issued.cert);
      assertEquals(tls.renewalDue(), false);
      clock.advance(renewalDueAt(issued.cert) - clock.now() - 1);
      assertEquals(tls.renewalDue(), false);
      clock.advance(1);
      assertEquals(tls.renewalDue(), true);
    } finally {
      tls.close();
    }
    // Past its end the stored certificate is not served: a throwaway until one is signed.
    clock.advance(LIFETIME_MS);
    const later = await prepare(dir, caFile, clock);
    assertOk(later !== null);
    try {
      assertOk(later.serving.cert !== issued.cert);
      assertEquals([later.notAfterMs, later.renewalDue()], [null, true]);
    } finally {
      later.close();
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
