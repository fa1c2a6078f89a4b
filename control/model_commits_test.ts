import { inProcessFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { addCommit, fakeRepo, smallFile } from "../dev/fake_hub/fake_repo.ts";
import { hubCommitSource } from "../models/commit_source.ts";
import { HubClient } from "../models/hub_client.ts";
import { HubToken } from "../models/hub_config.ts";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, registerNodes, testControl, thrown } from "../tests/control_fixture.ts";
import type { ControlPlane } from "./control_plane.ts";
import { InvalidInputError } from "./errors.ts";
import { MemoryStore } from "./store/memory_store.ts";
import { parseDeployment } from "../deployment/load.ts";
import { RETRY_FIRST_MS } from "./model_commits.ts";

/** A fake hub with QWEN's repo (one commit on main) and a gated one; a control plane resolving through it. */
async function setup() {
  const files = [await smallFile("config.json", '{"model_type": "qwen2"}')];
  const repo = fakeRepo(QWEN.model, files, { refs: ["main", "v1"] });
  const gated = fakeRepo("org/gated", files, { gated: "manual" });
  const hub = inProcessFakeHub({ repos: [repo, gated] });
  const client = new HubClient({ config: { endpoint: hub.endpoint }, fetch: hub.fetch });
  const { cp, clock, store } = await testControl({ commits: hubCommitSource(client) });
  await registerNodes(cp, ["n1"]);
  return { cp, clock, store, hub, repo, files, first: repo.refs.main };
}

/** The model commits of every launch in node n1's desired state. */
async function launchedCommits(cp: ControlPlane): Promise<(string | undefined)[]> {
  await cp.reconcile();
  const desired = await cp.desired.wait("n1", -1, 0);
  return desired.shards.map((s) => s.launch.model_commit);
}

/** The events of `kind`, their messages. */
async function events(cp: ControlPlane, kind: string): Promise<string[]> {
  return (await cp.events.list({ limit: 1000 })).filter((e) => e.kind === kind).map((e) =>
    e.message
  );
}

Deno.test("apply resolves the revision once and stores the commit; every launch carries it", async () => {
  const { cp, store, first } = await setup();
  const created = await cp.deployments.apply(QWEN);
  assertEquals([created.created, created.warnings], [true, []]);
  const stored = (await store.listDeployments())[0];
  assertEquals([stored.model_commit, stored.history?.[0].model_commit], [first, first]);
  assertEquals(await launchedCommits(cp), [first]);
  assertEquals(await events(cp, "model_resolved"), [
    `model ${QWEN.model} revision main → commit ${first} (deployment revision 1)`,
  ]);
});

Deno.test("re-apply: the same commit is unchanged; a new upstream commit is a new revision that rolls", async () => {
  const { cp, hub, repo, files, first } = await setup();
  await cp.deployments.apply(QWEN);
  await cp.reconcile();
  const again = await cp.deployments.apply(QWEN);
  assertEquals([again.result, again.revision, again.changes], ["unchanged", 1, []]);

  const second = addCommit(repo, [...files, await smallFile("README.md", "new")], ["main"]);
  hub.addRepo(repo);
  const dry = await cp.deployments.apply(QWEN, { dryRun: true });
  const change = { path: "model_commit", from: first, to: second, rolls: true };
  assertEquals([dry.result, dry.revision, dry.changes, dry.rolling], [
    "updated",
    2,
    [change],
    ["qwen-r0"],
  ]);
  assertEquals(cp.deployments.get("qwen").model_commit, first, "a dry run stores nothing");
  const updated = await cp.deployments.apply(QWEN);
  assertEquals([updated.result, updated.revision, updated.changes], ["updated", 2, [change]]);
  const d = cp.deployments.get("qwen");
  assertEquals(d.model_commit, second);
  assertEquals(d.history?.map((h) => [h.revision, h.model_commit]), [[1, first], [2, second]]);
  assertEquals((await cp.deployments.apply(QWEN)).result, "unchanged");

  // A tag still at the first commit: a new revision of the spec, back at that commit.
  const tagged = await cp.deployments.apply({ ...QWEN, revision: "v1" });
  assertEquals(tagged.result, "updated");
  assertEquals(tagged.changes.map((c) => [c.path, c.from, c.to]), [
    ["revision", "main", "v1"],
    ["model_commit", second, first],
  ]);
});

Deno.test("the hub's final answers refuse the apply with its words; nothing is stored", async () => {
  const { cp, store, hub } = await setup();
  const cases: [Record<string, unknown>, string, string][] = [
    [{ model: "org/missing" }, "model", `model org/missing not found on ${hub.endpoint}`],
    [
      { revision: "v9" },
      "revision",
      `model ${QWEN.model} revision v9 not found on ${hub.endpoint}`,
    ],
    [{ model: "org/gated" }, "model", "model org/gated is gated: set HF_TOKEN"],
  ];
  for (const [change, path, words] of cases) {
    const e = await thrown(cp.deployments.apply({ ...QWEN, ...change }));
    assertOk(e instanceof InvalidInputError, `${JSON.stringify(change)} was accepted`);
    assertEquals(e.path, path);
    assertStringIncludes(e.message, words);
  }
  assertEquals(await store.listDeployments(), []);
});

Deno.test("hub unreachable: apply warns and stores no commit; the background retries with backoff, then resolves", async () => {
  const { cp, clock, hub, first } = await setup();
  await hub.offline();
  const applied = await cp.deployments.apply(QWEN);
  assertEquals(applied.warnings.map((w) => w.path), [["revision"]]);
  assertStringIncludes(applied.warnings[0].message, `hub ${hub.endpoint} unreachable`);
  assertStringIncludes(applied.warnings[0].message, "retries in the background");
  assertEquals(cp.deployments.get("qwen").model_commit, null);
  assertEquals(await launchedCommits(cp), [undefined], "launched without a commit meanwhile");

  // The pass above started the first try; it fails while the hub is off.
  await cp.state.modelCommits.settled();
  const failed = await events(cp, "model_resolve_failed");
  assertEquals(failed.length, 1);
  assertStringIncludes(failed[0], "(try 1)");
  assertStringIncludes(failed[0], "unreachable");
  assertStringIncludes(failed[0], `next try in ${RETRY_FIRST_MS / 1000} s`);

  // Back online, but the backoff has not passed: no try yet.
  hub.online();
  await cp.reconcile();
  await cp.state.modelCommits.settled();
  assertEquals(cp.deployments.get("qwen").model_commit, null);
  clock.advance(RETRY_FIRST_MS);
  await cp.reconcile();
  await cp.state.modelCommits.settled();
  assertEquals(cp.deployments.get("qwen").model_commit, first);
  assertEquals(await events(cp, "model_resolved"), [
    `model ${QWEN.model} revision main → commit ${first} (deployment revision 1)`,
  ]);
  assertEquals(await launchedCommits(cp), [first]);
  // Resolved: no more tries.
  clock.advance(10 * RETRY_FIRST_MS);
  await cp.reconcile();
  await cp.state.modelCommits.settled();
  assertEquals((await events(cp, "model_resolve_failed")).length, 1);
});

Deno.test("resolution pending: a launch names the deployment's revision (not main), so the agent never fetches main for it", async () => {
  const { cp, hub, first } = await setup();
  await hub.offline();
  await cp.deployments.apply({ ...QWEN, revision: "v1" });
  await cp.reconcile();
  const launch = (await cp.desired.wait("n1", -1, 0)).shards[0].launch;
  assertEquals([launch.model_commit, launch.model_revision], [undefined, "v1"]);
  hub.online();
  await cp.deployments.apply({ ...QWEN, revision: "v1" });
  await cp.reconcile();
  const resolved = (await cp.desired.wait("n1", -1, 0)).shards[0].launch;
  assertEquals([resolved.model_commit, resolved.model_revision], [first, "v1"]);
  // main is the agent's default: not sent, so such launches hash as before.
  const main = await setup();
  await main.cp.deployments.apply(QWEN);
  await main.cp.reconcile();
  const plain = (await main.cp.desired.wait("n1", -1, 0)).shards[0].launch;
  assertEquals(Object.hasOwn(plain, "model_revision"), false);
});

Deno.test("a revision that is a full commit is its own commit when the hub cannot be asked; a local path has none", async () => {
  const { cp, hub, first } = await setup();
  await hub.offline();
  const pinned = await cp.deployments.apply({ ...QWEN, revision: first });
  assertEquals(pinned.warnings, []);
  assertEquals(cp.deployments.get("qwen").model_commit, first);
  const local = await cp.deployments.apply({
    ...QWEN,
    name: "local",
    served_model_name: "local",
    model: "/models/qwen",
  });
  assertEquals(local.deployment.revision, undefined);
  assertEquals(cp.deployments.get("local").model_commit, null);
});

Deno.test("the hub token is in no warning, refusal or event of resolution", async () => {
  const secret = "hf_resolution_secret_123";
  const files = [await smallFile("config.json", "{}")];
  const hub = inProcessFakeHub({
    repos: [fakeRepo(QWEN.model, files), fakeRepo("org/gated", files, { gated: "manual" })],
    tokens: [secret],
  });
  const client = new HubClient({
    config: { endpoint: hub.endpoint, token: new HubToken(secret) },
    fetch: hub.fetch,
  });
  const { cp, clock } = await testControl({ commits: hubCommitSource(client) });
  const refused = await thrown(cp.deployments.apply({ ...QWEN, model: "org/gated" }));
  assertOk(refused instanceof InvalidInputError);
  assertStringIncludes(refused.message, "HF_TOKEN was not granted access");
  await hub.offline();
  const applied = await cp.deployments.apply(QWEN);
  await cp.reconcile();
  await cp.state.modelCommits.settled();
  clock.advance(RETRY_FIRST_MS);
  await cp.reconcile();
  await cp.state.modelCommits.settled();
  const said = JSON.stringify([refused.message, applied.warnings, await cp.events.list()]);
  assertOk(said.includes("model_resolve_failed"), said);
  assertOk(!said.includes(secret), "the token leaked");
});

Deno.test("a deployment stored before revisions is read at main and resolved in the background", async () => {
  const files = [await smallFile("config.json", "{}")];
  const repo = fakeRepo(QWEN.model, files);
  const hub = inProcessFakeHub({ repos: [repo] });
  const client = new HubClient({ config: { endpoint: hub.endpoint }, fetch: hub.fetch });
  const { revision: _r, pinned: _p, ...old } = parseDeployment(QWEN, "test").deployment;
  const store = new MemoryStore();
  await store.putDeployment({ name: "qwen", spec: old, created_at: 0, updated_at: 0 });
  const { cp } = await testControl({ store, commits: hubCommitSource(client) });
  assertEquals(cp.deployments.get("qwen").model_commit, null);
  await cp.reconcile();
  await cp.state.modelCommits.settled();
  assertEquals(cp.deployments.get("qwen").model_commit, repo.refs.main);
  assertEquals((await cp.deployments.apply(QWEN)).result, "unchanged");
});
