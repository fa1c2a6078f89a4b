/**
 * The models page through the control plane's app: each revision a
 * deployment serves or an agent holds, with its hosts counted by state and
 * the first few named; the nav links it; a fragment refreshes it.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, registerNodes, testControl } from "../tests/control_fixture.ts";
import { createControlApi } from "../control/api.ts";
import { hashToken, newToken } from "../http/tokens.ts";
import type { CachedRevisionReport } from "../protocol/model_cache_report.ts";
import { hostCounts, HOSTS_NAMED } from "./models_page.tsx";
import { uiApp } from "./ui_app.tsx";

const A = "a".repeat(40);
const GIB = 2 ** 30;

function held(state: CachedRevisionReport["state"], done: number): CachedRevisionReport {
  return {
    repo: "acme/tiny",
    commit: A,
    bytes: 10 * GIB,
    state,
    bytes_done: done,
    last_used: null,
    pinned: false,
  };
}

Deno.test("hostCounts: hosts by state, in lifecycle order", () => {
  const h = (node: string, state: "complete" | "downloading" | "requested" | "failed") => ({
    node,
    state,
    bytes_done: 0,
    bytes: null,
    last_used: null,
  });
  assertEquals(
    hostCounts([
      h("n1", "requested"),
      h("n2", "complete"),
      h("n3", "complete"),
      h("n4", "downloading"),
      h("n5", "failed"),
    ]),
    "2 complete · 1 downloading · 1 requested · 1 failed",
  );
  assertEquals(hostCounts([]), "");
});

Deno.test("ui: the models page lists each revision with its deployments and hosts; many hosts are counted, a few named", async () => {
  const { cp } = await testControl();
  const nodes = Array.from({ length: HOSTS_NAMED + 4 }, (_, i) => `n${i + 1}`);
  await registerNodes(cp, nodes);
  await cp.deployments.apply(QWEN);
  for (const [i, node] of nodes.entries()) {
    const r = i === 0 ? held("downloading", 4.5 * GIB) : held("complete", 10 * GIB);
    cp.state.modelCaches.set(node, { room_bytes: null, revisions: [r], omitted: 0, evicted: [] });
  }
  // The last node's pull failed for good (it reports only a partial copy): named first.
  const last = nodes.at(-1)!;
  cp.state.modelCaches.set(last, {
    room_bytes: null,
    revisions: [held("partial", GIB)],
    omitted: 0,
    evicted: [],
  });
  const gated = "model acme/tiny is gated: set HF_TOKEN to a token that was granted access";
  cp.state.modelPulls.set(`acme/tiny@${A}`, {
    id: `acme/tiny@${A}`,
    model: "acme/tiny",
    commit: A,
    nodes: [{
      node: last,
      state: "failed",
      requested_at: 1,
      finished_at: 2,
      reason: gated,
      kind: "gated",
    }],
    created_at: 1,
    updated_at: 2,
    finished_at: 2,
  });
  const admin = newToken("llmgw_admin");
  const app = createControlApi(cp, {
    adminTokenHashes: [await hashToken(admin)],
    joinTokenHashes: [],
  }, uiApp);
  for (const path of ["/ui/models", "/ui/fragments/models"]) {
    const res = await app.request(`https://127.0.0.1:7070${path}`, {
      headers: { authorization: `Bearer ${admin}` },
    });
    assertEquals(res.status, 200, path);
    const html = await res.text();
    const tiny = /<tr data-model="acme\/tiny"[\s\S]*?<\/tr>/.exec(html)?.[0] ?? "";
    assertStringIncludes(tiny, "aaaaaaa");
    assertStringIncludes(tiny, "10.0 GiB");
    assertStringIncludes(tiny, `${nodes.length - 2} complete · 1 downloading · 1 failed`);
    assertStringIncludes(tiny, `<div class="problem">${last} failed (gated: ${gated})</div>`);
    assertStringIncludes(tiny, "n1 downloading 45%");
    assertStringIncludes(tiny, "and 4 more");
    assertOk(
      !tiny.includes(`>${nodes.at(-2)} complete<`),
      "hosts past the first few are not named",
    );
    const qwen = new RegExp(`<tr data-model="${QWEN.model}"[\\s\\S]*?</tr>`).exec(html)?.[0] ?? "";
    assertStringIncludes(qwen, "main@?");
    assertStringIncludes(qwen, QWEN.name);
    assertStringIncludes(qwen, "on no host");
    if (path === "/ui/models") assertStringIncludes(html, `href="/ui/models" class="on"`);
  }
});
