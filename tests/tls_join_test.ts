/**
 * Joining over TLS (design §11.2): a real control plane serving HTTPS from its
 * own CA and a real agent. The join token pins the CA by its key hash; the
 * agent's key stays on its host (it sends a CSR); the control plane calls
 * the agent's local API over TLS with its own client certificate; a wrong
 * CA hash stops the agent before any secret is sent; a malformed CSR is 400.
 */
import nodeTls from "node:tls";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "./assert.ts";
import { until } from "./until.ts";
import { registration } from "./registration.ts";
import { Agent, AgentError } from "../agent/agent.ts";
import { agentTlsPaths } from "../agent/agent_tls.ts";
import { ClusterTls } from "../control/cluster_tls.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { startControl } from "../control/server.ts";
import { CertificateAuthority, notAfter, readCertificate } from "../tls/authority.ts";
import { pinnedFetch } from "../tls/trust.ts";

const MACHINE = fileURLToPath(new URL("./fixtures/machines/l40s_pcie_vm", import.meta.url));
const POLL = { timeoutMs: 30_000, intervalMs: 25 };

async function tlsControl() {
  const now = Date.now();
  const { ca } = await CertificateAuthority.create({ now, lifetimeMs: 86_400_000 });
  const tls = await ClusterTls.of(ca, ["127.0.0.1"]);
  const running = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: ["admin-token-for-tls-tests"],
    joinTokens: [],
    tls,
    reconcileMs: 100,
    thresholds: { heartbeat_interval_ms: 200 },
  });
  return { running, tls, ca };
}

function agent(controlUrl: string, joinToken: string, stateDir: string, logs: string[]): Agent {
  return new Agent({
    controlUrl,
    joinToken,
    nodeId: "node-tls",
    hostname: "node-tls.test",
    stateDir,
    discovery: { nvidiaSmi: `${MACHINE}/nvidia-smi`, sysfsRoot: `${MACHINE}/sysfs` },
    mgmtAddr: "127.0.0.1",
    mgmtInterface: "lo",
    listen: { hostname: "127.0.0.1", port: 0 },
    proxyListen: { hostname: "127.0.0.1", port: 0 },
    rediscoverMs: 60_000,
    heartbeatIntervalMs: 200,
    retry: { initialMs: 50, maxMs: 400, factor: 2 },
    supervisor: { tickMs: 50 },
    logSink: (line) => logs.push(line),
  });
}

Deno.test("an agent joins with the CA pinned by the join token and serves with the certificate its CSR got", async () => {
  const { running, tls } = await tlsControl();
  const dir = await Deno.makeTempDir({ prefix: "llmgw_tls_join_" });
  const logs: string[] = [];
  const join_ = await running.cp.tokens.create({ kind: "join" });
  const a = agent(running.url, `${join_.token}.${tls.caHash}`, dir, logs);
  try {
    assertOk(running.url.startsWith("https://"), running.url);
    await a.start();
    await until("registered", () => running.cp.inventory.getNode("node-tls"), POLL);
    // The CA was pinned and the agent holds a certificate for its own key.
    const paths = agentTlsPaths(dir);
    await until(
      "the signed certificate stored",
      () => a.metricsSnapshot().certificate_not_after_ms,
      POLL,
    );
    assertEquals(Deno.readTextFileSync(paths.ca), tls.ca.certPem);
    assertEquals(Deno.statSync(paths.key).mode! & 0o777, 0o600);
    const cert = Deno.readTextFileSync(paths.cert);
    assertOk(notAfter(cert) > Date.now());
    assertStringIncludes(readCertificate(cert, "the agent's").subject, "node:node-tls");
    const snapshot = a.metricsSnapshot();
    assertEquals(snapshot.certificate_not_after_ms, notAfter(cert));

    // Both listeners speak TLS with that certificate: the CA verifies it.
    const reg = running.cp.state.nodes.get("node-tls")!.registration;
    assertOk(reg.agent_url!.startsWith("https://127.0.0.1:"), reg.agent_url!);
    assertOk(reg.proxy_url!.startsWith("https://127.0.0.1:"), reg.proxy_url!);
    const trusting = pinnedFetch(tls.ca.certPem);
    try {
      const health = await trusting.fetch(`${reg.agent_url}/healthz`);
      assertEquals(health.status, 200);
      await health.body?.cancel();
      // The local API's /v1 needs the control plane's client certificate besides the token.
      const status = await trusting.fetch(`${reg.agent_url}/v1/status`, {
        headers: { authorization: `Bearer ${reg.agent_token}` },
      });
      assertEquals(status.status, 403);
      assertEquals((await status.json()).error.code, "client_certificate_required");
    } finally {
      trusting.close();
    }
    // Plain HTTP to a TLS port fails.
    await assertRejects(() => fetch(reg.agent_url!.replace("https:", "http:")), TypeError);
    // With a client certificate from the CA (the control plane's kind), /v1 answers.
    const own = await tls.controlCertificate(Date.now());
    const mutual = pinnedFetch(tls.ca.certPem, own);
    try {
      const status = await mutual.fetch(`${reg.agent_url}/v1/status`, {
        headers: { authorization: `Bearer ${reg.agent_token}` },
      });
      assertEquals(status.status, 200);
      assertEquals((await status.json()).node_id, "node-tls");
    } finally {
      mutual.close();
    }
    assertOk(
      !logs.join("\n").includes(join_.token.split(".")[2]),
      "the join secret is never logged",
    );
  } finally {
    await a.stop({ stopEngines: true });
    await running.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a join token naming another CA stops the agent before any secret is sent", async () => {
  const { running } = await tlsControl();
  const dir = await Deno.makeTempDir({ prefix: "llmgw_tls_wrong_ca_" });
  const { ca: other } = await CertificateAuthority.create({
    now: Date.now(),
    lifetimeMs: 86_400_000,
  });
  const otherHash = (await ClusterTls.of(other, [])).caHash;
  const join_ = await running.cp.tokens.create({ kind: "join" });
  const a = agent(running.url, `${join_.token}.${otherHash}`, dir, []);
  try {
    const err = await a.start().then(() => null, (e) => e as Error);
    assertOk(err instanceof AgentError, String(err));
    assertStringIncludes(err!.message, "refusing to send the token");
    assertEquals(running.cp.inventory.listNodes(), [], "nothing registered");
    const events = await running.cp.events.list({});
    assertEquals(events.filter((ev) => ev.kind === "node_registered"), []);
    assertOk(!Deno.statSync(join(dir, "tls")).isFile);
  } finally {
    await a.stop({ stopEngines: true }).catch(() => {});
    await running.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a malformed CSR is a 400 naming csr, and registers nothing", async () => {
  const { running, tls } = await tlsControl();
  const trusting = pinnedFetch(tls.ca.certPem);
  const join_ = await running.cp.tokens.create({ kind: "join" });
  try {
    const body = registration("n-csr");
    for (
      const csr of [
        "not a csr",
        "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----",
      ]
    ) {
      const res = await trusting.fetch(`${running.url}/v1/agent/register`, {
        method: "POST",
        headers: { authorization: `Bearer ${join_.token}`, "content-type": "application/json" },
        body: JSON.stringify({ ...body, csr }),
      });
      const answer = await res.json();
      assertEquals(res.status, 400, JSON.stringify(answer));
      assertEquals(answer.error.path, "csr");
    }
    assertEquals(running.cp.inventory.listNodes(), []);
  } finally {
    trusting.close();
    await running.close();
  }
});

Deno.test("an agent that pinned one CA refuses a control plane presenting another: nothing is sent", async () => {
  const { running } = await tlsControl();
  const dir = await Deno.makeTempDir({ prefix: "llmgw_tls_other_ca_" });
  const logs: string[] = [];
  const { ca: other } = await CertificateAuthority.create({
    now: Date.now(),
    lifetimeMs: 86_400_000,
  });
  // As if this agent had joined another cluster's control plane at this URL before.
  Deno.mkdirSync(join(dir, "tls"), { recursive: true });
  Deno.writeTextFileSync(agentTlsPaths(dir).ca, other.certPem);
  const join_ = await running.cp.tokens.create({ kind: "join" });
  const a = agent(running.url, join_.token, dir, logs);
  try {
    await a.start();
    await until(
      "a refused registration in the log",
      () => logs.some((l) => l.includes("registration failed")),
      POLL,
    );
    assertEquals(running.cp.inventory.listNodes(), [], "the server was refused before any request");
    assertOk(!logs.join("\n").includes(join_.token.split(".")[2]), "the token is never logged");
  } finally {
    await a.stop({ stopEngines: true });
    await running.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("certificates are renewed two thirds into their life with no restart and no missed heartbeat", async () => {
  const now = Date.now();
  const { ca } = await CertificateAuthority.create({ now, lifetimeMs: 86_400_000 });
  // Certificates of a few seconds (a minute of back-dating for skew counts in their life).
  const tls = await ClusterTls.of(ca, ["127.0.0.1"], 64_000);
  const running = await startControl({
    hostname: "127.0.0.1",
    port: 0,
    store: new MemoryStore(),
    adminTokens: [],
    joinTokens: [],
    tls,
    reconcileMs: 100,
    thresholds: { heartbeat_interval_ms: 200, unreachable_after_ms: 5_000 },
  });
  const dir = await Deno.makeTempDir({ prefix: "llmgw_tls_renew_" });
  const join_ = await running.cp.tokens.create({ kind: "join" });
  const a = agent(running.url, `${join_.token}.${tls.caHash}`, dir, []);
  try {
    await a.start();
    const first = await until(
      "the first certificate",
      () => a.metricsSnapshot().certificate_not_after_ms,
      POLL,
    );
    const renewed = await until(
      "a renewed certificate",
      () => {
        const at = a.metricsSnapshot().certificate_not_after_ms;
        return at !== null && at > first ? at : null;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    assertOk(renewed > first);
    // Served at once: the local API presents the renewed certificate, no restart.
    assertEquals(notAfter(Deno.readTextFileSync(agentTlsPaths(dir).cert)), renewed);
    const served = await new Promise<number>((resolve, reject) => {
      const socket = nodeTls.connect({
        host: "127.0.0.1",
        port: a.localAddr!.port,
        ca: tls.ca.certPem,
      }, () => {
        resolve(Date.parse(socket.getPeerCertificate().valid_to));
        socket.end();
      });
      socket.on("error", reject);
    });
    // valid_to has whole seconds.
    assertEquals(Math.floor(served / 1000), Math.floor(renewed / 1000));
    const events = await running.cp.events.list({});
    assertOk(events.some((e) => e.kind === "certificate_issued"), "the renewal is an event");
    assertEquals(events.filter((e) => e.kind === "node_unreachable"), [], "no heartbeat missed");
    assertEquals(a.metricsSnapshot().certificate_renewal_failures, 0);
    assertEquals(running.cp.inventory.getNode("node-tls")?.state, "ready");
  } finally {
    await a.stop({ stopEngines: true });
    await running.close();
    await Deno.remove(dir, { recursive: true });
  }
});
