/**
 * The peer plan in the desired state (issue #25 item 3), on a control plane
 * with a memory store and a fake clock: four nodes running one model
 * revision get a chain (the first fetches from the origin), a node that
 * stops heartbeating is dropped and its follower given the node before it,
 * a ready node becomes a root, and a cluster without TLS gets no peers.
 */
import { assertEquals } from "../tests/assert.ts";
import { QWEN, reportAll, testControl } from "../tests/control_fixture.ts";
import { registration } from "../tests/registration.ts";
import { cacheHolding } from "../tests/model_cache_report.ts";
import type { ModelCacheReport } from "../protocol/model_cache_report.ts";
import type { ControlPlane } from "./control_plane.ts";
import { setCurrentCommit } from "./rollout_revisions.ts";

/** One replica per node: TP 8 fills a recorded 8-GPU server. */
const SHARED = {
  ...QWEN,
  name: "shared",
  model: "acme/tiny-llm",
  replicas: 4,
  profiles: [{ name: "tp8", engine: "vllm", gpu_class: "rtx4090-24g", tensor_parallel: 8 }],
};

/** A node's model cache report holding one revision of acme/tiny-llm, `done` of `bytes` fetched. */
function cacheOf(
  commit: string,
  state: "complete" | "downloading",
  done: number,
  bytes: number,
): ModelCacheReport {
  return cacheHolding({
    repo: "acme/tiny-llm",
    commit,
    bytes,
    state,
    bytesDone: done,
    roomBytes: null,
  });
}

async function register(cp: ControlPlane, ids: string[], scheme: "https" | "http" = "https") {
  for (const id of ids) {
    await cp.nodes.register(
      registration(id, "rtx4090_8x_server", { agent_url: `${scheme}://${id}.lab:7400` }),
      null,
    );
  }
}

async function sourcesOf(cp: ControlPlane, ids: string[]) {
  const out: Record<string, string> = {};
  for (const id of ids) {
    const d = await cp.desired.wait(id, -1, 0);
    out[id] = (d.model_sources ?? []).map((s) =>
      [
        ...s.peers.map((p) => `${p.node_id}(${p.url})`),
        ...(s.origin ? ["origin"] : []),
      ]
        .join(" > ")
    ).join("; ") || "-";
  }
  return out;
}

Deno.test("model sources: four nodes of one revision form a chain; a silent node serves nobody and is planned for as a leaf", async () => {
  const { cp, clock } = await testControl();
  const ids = ["n1", "n2", "n3", "n4"];
  await register(cp, ids);
  await cp.deployments.apply(SHARED);
  await cp.reconcile();
  const url = (id: string) => `${id}(https://${id}.lab:7400)`;
  assertEquals(await sourcesOf(cp, ids), {
    n1: "-",
    n2: `${url("n1")} > origin`,
    n3: `${url("n2")} > ${url("n1")} > origin`,
    n4: `${url("n3")} > ${url("n2")} > ${url("n1")} > origin`,
  });
  const g3 = (await cp.desired.wait("n3", -1, 0)).generation;
  // n2 stops heartbeating; the others go on (still downloading: not ready).
  clock.advance(cp.inventory.thresholds.unreachable_after_ms + 1);
  for (const id of ["n1", "n3", "n4"]) await reportAll(cp, id, "starting");
  await cp.reconcile();
  const after = await sourcesOf(cp, ["n1", "n3", "n4"]);
  assertEquals(after, {
    n1: "-",
    n3: `${url("n1")} > origin`,
    n4: `${url("n3")} > ${url("n1")} > origin`,
  });
  // The change reached n3 as a new generation (its long poll wakes).
  assertEquals((await cp.desired.wait("n3", -1, 0)).generation > g3, true);
  // n2 serves nobody now, but is planned for as a leaf: the desired state it reads when it comes
  // back points it at peers, not at the origin alone (tests/hosts/model_fleet_test.ts saw a
  // restarted agent fetch a second copy from the hub before the next pass re-planned it).
  assertEquals(await sourcesOf(cp, ["n2"]), {
    n2: `${url("n4")} > ${url("n3")} > ${url("n1")} > origin`,
  });
});

Deno.test("model sources: a node whose shard is ready is a root; the origin only last", async () => {
  const { cp } = await testControl();
  const ids = ["n1", "n2", "n3"];
  await register(cp, ids);
  await cp.deployments.apply({ ...SHARED, replicas: 3 });
  await cp.reconcile();
  await reportAll(cp, "n3", "ready");
  for (const id of ["n1", "n2"]) await reportAll(cp, id, "starting");
  await cp.reconcile();
  const url = (id: string) => `${id}(https://${id}.lab:7400)`;
  assertEquals(await sourcesOf(cp, ids), {
    n1: `${url("n3")} > origin`,
    n2: `${url("n1")} > ${url("n3")} > origin`,
    n3: "-",
  });
});

Deno.test("model sources: agents without TLS serve no peers, so none are assigned", async () => {
  const { cp } = await testControl();
  const ids = ["n1", "n2"];
  await register(cp, ids, "http");
  await cp.deployments.apply({ ...SHARED, replicas: 2 });
  await cp.reconcile();
  assertEquals(await sourcesOf(cp, ids), { n1: "-", n2: "-" });
});

Deno.test("model sources: a live node whose cache holds the revision serves it, shard or not", async () => {
  const { cp } = await testControl();
  await register(cp, ["n1", "n2", "n3"]);
  await cp.deployments.apply({ ...SHARED, replicas: 2 });
  // The control plane resolved the revision (here set as resolution would).
  const commit = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
  setCurrentCommit(cp.state.deployments.get("shared")!, commit);
  await cp.reconcile();
  const placed = new Set(cp.replicas().flatMap((r) => r.shards.map((s) => s.node)));
  const [spare] = ["n1", "n2", "n3"].filter((n) => !placed.has(n));
  const [first, second] = [...placed].sort();
  cp.state.modelCaches.set(spare, cacheOf(commit, "complete", 1, 1));
  await cp.reconcile();
  const url = (id: string) => `${id}(https://${id}.lab:7400)`;
  assertEquals(await sourcesOf(cp, [first, second, spare]), {
    [first]: `${url(spare)} > origin`,
    [second]: `${url(first)} > ${url(spare)} > origin`,
    [spare]: "-",
  });
  assertEquals((await cp.desired.wait(first, -1, 0)).model_sources?.[0].commit, commit);
});

Deno.test("model sources: a node already fetching leads the chain, whatever its name", async () => {
  const { cp } = await testControl();
  await register(cp, ["n1", "n2"]);
  await cp.deployments.apply({ ...SHARED, replicas: 2 });
  const commit = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";
  setCurrentCommit(cp.state.deployments.get("shared")!, commit);
  // n2 began alone from the origin (n1 came later): it has a third of the files.
  cp.state.modelCaches.set("n2", cacheOf(commit, "downloading", 1, 3));
  await cp.reconcile();
  const chained = { n1: "n2(https://n2.lab:7400) > origin", n2: "-" };
  assertEquals(await sourcesOf(cp, ["n1", "n2"]), chained);
  // n1's report, newer than n2's, shows more bytes: the chain does not turn round.
  cp.state.modelCaches.set("n1", cacheOf(commit, "downloading", 2, 3));
  await cp.reconcile();
  assertEquals(await sourcesOf(cp, ["n1", "n2"]), chained);
});
