/**
 * A node's model cache on the fleet page: the row's view of the agent's
 * report (room, held, the first revisions, the rest counted), and the page
 * rendering it through the control plane's app, a node without a report
 * saying so.
 */
import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { registerNodes, testControl } from "../tests/control_fixture.ts";
import { createControlApi } from "../control/api.ts";
import { hashToken, newToken } from "../http/tokens.ts";
import type { ModelCacheReport } from "../protocol/model_cache_report.ts";
import { CACHE_REVISIONS_SHOWN, nodeCache } from "./node_cache.ts";
import { uiApp } from "./ui_app.tsx";

const A = "a".repeat(40);
const B = "b".repeat(40);
const GIB = 2 ** 30;

function report(extra: Partial<ModelCacheReport> = {}): ModelCacheReport {
  return {
    room_bytes: 120 * GIB,
    revisions: [
      {
        repo: "acme/next",
        commit: B,
        bytes: 10 * GIB,
        state: "downloading",
        bytes_done: 4.5 * GIB,
        last_used: null,
        pinned: false,
      },
      {
        repo: "acme/tiny",
        commit: A,
        bytes: 15 * GIB,
        state: "complete",
        bytes_done: 15 * GIB,
        last_used: 1,
        pinned: true,
      },
    ],
    omitted: 0,
    evicted: [],
    ...extra,
  };
}

Deno.test("nodeCache: room, held revisions and bytes, downloads with their percent; none without a report", () => {
  assertEquals(nodeCache(undefined), null);
  assertEquals(nodeCache(report()), {
    room_bytes: 120 * GIB,
    held_bytes: 15 * GIB,
    complete: 1,
    revisions: [
      {
        name: "acme/next@bbbbbbb",
        state: "downloading",
        bytes: 10 * GIB,
        percent: 45,
        pinned: false,
      },
      {
        name: "acme/tiny@aaaaaaa",
        state: "complete",
        bytes: 15 * GIB,
        percent: null,
        pinned: true,
      },
    ],
    more: 0,
  });
});

Deno.test("nodeCache: a few revisions listed, the rest and the report's omitted counted", () => {
  const many = Array.from({ length: CACHE_REVISIONS_SHOWN + 2 }, (_, i) => ({
    ...report().revisions[1],
    repo: `acme/m${i}`,
  }));
  const c = nodeCache(report({ revisions: many, omitted: 7, room_bytes: null }))!;
  assertEquals(c.revisions.length, CACHE_REVISIONS_SHOWN);
  assertEquals([c.more, c.complete, c.room_bytes], [2 + 7, CACHE_REVISIONS_SHOWN + 2 + 7, null]);
});

Deno.test("ui: the fleet page shows each node's model cache, and says so for a node that reports none", async () => {
  const { cp } = await testControl();
  await registerNodes(cp, ["n1", "n2"]);
  cp.state.modelCaches.set("n1", report());
  const admin = newToken("llmgw_admin");
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken(admin)],
    joinTokenHashes: [],
  }, uiApp);
  for (const path of ["/ui/", "/ui/fragments/fleet"]) {
    const res = await app.request(`https://127.0.0.1:7070${path}`, {
      headers: { authorization: `Bearer ${admin}` },
    });
    assertEquals(res.status, 200, path);
    const html = await res.text();
    assertStringIncludes(html, "Model cache");
    const n1 = /<tr data-node="n1">[\s\S]*?<\/tr>/.exec(html)?.[0] ?? "";
    assertStringIncludes(n1, "1 held · 120.0 GiB room");
    assertStringIncludes(n1, "acme/next@bbbbbbb</span> downloading 45%");
    assertStringIncludes(n1, "acme/tiny@aaaaaaa</span> 15.0 GiB · pinned");
    const n2 = /<tr data-node="n2">[\s\S]*?<\/tr>/.exec(html)?.[0] ?? "";
    assertStringIncludes(n2, "no cache reported");
  }
});
