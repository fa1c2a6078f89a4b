import { assertEquals, assertOk } from "../tests/assert.ts";
import { ClusterTls } from "../control/cluster_tls.ts";
import { startControl } from "../control/server.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { newToken } from "../http/tokens.ts";
import { CertificateAuthority } from "../tls/authority.ts";
import { pinnedFetch } from "../tls/trust.ts";
import { startEmbeddedGateway } from "./embedded_gateway.ts";

/** Resolves `p`, or rejects after `ms`: a gateway that never syncs fails the test, not hangs it. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

for (const secure of [true, false]) {
  Deno.test(`the embedded gateway follows its control plane (${secure ? "TLS" : "plain HTTP"})`, async () => {
    const now = Date.now();
    const tls = secure
      ? await ClusterTls.of(
        (await CertificateAuthority.create({ now, lifetimeMs: 86_400_000 })).ca,
        ["127.0.0.1"],
      )
      : undefined;
    const token = newToken("llmgw_gateway");
    const control = await startControl({
      hostname: "127.0.0.1",
      port: 0,
      store: new MemoryStore(),
      adminTokens: [newToken("llmgw_admin")],
      joinTokens: [],
      gatewayTokens: [token],
      tls,
    });
    const trust = tls === undefined ? null : pinnedFetch(tls.ca.certPem);
    try {
      const gateway = await startEmbeddedGateway({
        hostname: "127.0.0.1",
        port: 0,
        controlUrl: control.url,
        token,
        intervalMs: 50,
        tls,
      });
      try {
        assertOk(gateway.url.startsWith(secure ? "https://" : "http://"), gateway.url);
        // Synced: its feed request was accepted, over the CA-pinned fetch when TLS.
        await within(gateway.synced, 10_000, "first poll of the control plane");
        // A loopback client is served while no API key exists; over TLS the
        // certificate is the cluster CA's, which the pinned fetch checks.
        const r = await (trust?.fetch ?? fetch)(`${gateway.url}/v1/models`);
        assertEquals(r.status, 200);
        assertEquals((await r.json()).data, []);
      } finally {
        await gateway.close();
      }
    } finally {
      trust?.close();
      await control.close();
    }
  });
}
