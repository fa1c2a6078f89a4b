/**
 * The replica page's events belong to the replica that has the id now
 * (control/identity.ts): a deployment deleted and applied again under its
 * name shows none of its predecessor's replica's events.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { QWEN, registerNodes, testControl } from "../../tests/control_fixture.ts";
import { createControlApi } from "../../control/api.ts";
import { hashToken, newToken } from "../../http/tokens.ts";
import { uiApp } from "../ui_app.tsx";

Deno.test("ui: a re-created deployment's replica page shows only its own events", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply(QWEN);
  await cp.reconcile();
  await cp.deployments.delete(QWEN.name);
  await cp.reconcile();
  await cp.deployments.apply(QWEN);
  await cp.reconcile();
  const id = cp.replicas()[0].id;
  // The predecessor's events are still kept: only the page leaves them out.
  const all = await cp.events.list({ subject: `replica/${id}`, incarnation: "all" });
  assertEquals(all.map((e) => e.kind), ["replica_placed", "replica_removed", "replica_placed"]);

  const admin = newToken("llmgw_admin");
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken(admin)],
    joinTokenHashes: [],
  }, uiApp);
  const res = await app.request(`https://127.0.0.1:7070/ui/replicas/${id}`, {
    headers: { authorization: `Bearer ${admin}` },
  });
  assertEquals(res.status, 200);
  const html = await res.text();
  assertStringIncludes(html, "replica_placed");
  assertOk(!html.includes("replica_removed"), "the predecessor's removal is on the page");
});
