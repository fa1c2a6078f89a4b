/**
 * Model facts at the resolved commit (issue #25 item 6): the control plane
 * reads a hub model's facts at the commit its revision resolved to, so a
 * branch that moves to a commit with another config.json is read again at
 * the new deployment revision, without a restart; a commit resolved late
 * (the hub was off at apply) gets its facts in the background.
 */
import { inProcessFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { addCommit, fakeRepo, smallFile } from "../dev/fake_hub/fake_repo.ts";
import { hubCommitSource } from "../models/commit_source.ts";
import { HubClient } from "../models/hub_client.ts";
import { hubClientFactsSource } from "../models/hub_facts.ts";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { QWEN, registerNodes, testControl, thrown } from "../tests/control_fixture.ts";
import { modelConfigTexts } from "../tests/model_configs.ts";
import { InvalidInputError } from "./errors.ts";
import { RETRY_FIRST_MS } from "./model_commits.ts";

/** Qwen2.5-7B's recorded config.json (28 heads), or with its heads changed. */
function config(heads?: number): string {
  const json = JSON.parse(modelConfigTexts("qwen2.5-7b-instruct").config);
  if (heads !== undefined) json.num_attention_heads = heads;
  return JSON.stringify(json);
}

async function setup() {
  const files = [
    await smallFile("config.json", config()),
    await smallFile("model.safetensors", "x".repeat(4096)),
  ];
  const repo = fakeRepo(QWEN.model, files);
  const hub = inProcessFakeHub({ repos: [repo] });
  const client = new HubClient({ config: { endpoint: hub.endpoint }, fetch: hub.fetch });
  const { cp, clock } = await testControl({
    commits: hubCommitSource(client),
    modelFacts: hubClientFactsSource(client),
  });
  await registerNodes(cp, ["n1"]);
  return { cp, clock, hub, repo, first: repo.refs.main };
}

const tp8 = { ...QWEN, profiles: [{ ...QWEN.profiles[0], name: "tp8", tensor_parallel: 8 }] };

Deno.test("facts are read at the resolved commit; main moved to a new config.json is read again at the new revision", async () => {
  const { cp, hub, repo, first } = await setup();
  // 28 heads at the first commit: TP 8 refused.
  const e = await thrown(cp.deployments.apply(tp8));
  assertOk(e instanceof InvalidInputError, String(e));
  assertStringIncludes(e.message, "Total number of attention heads (28)");
  await cp.deployments.apply(QWEN);
  const facts = cp.state.modelFacts;
  assertEquals(facts.known(QWEN.model, "main", first)?.attention_heads, 28);
  assertEquals(facts.known(QWEN.model, "main"), null, "known by commit, not by branch");
  // The files' sizes (what a download writes) beside the weights.
  assertEquals(facts.known(QWEN.model, "main", first)?.download_bytes, config().length + 4096);

  // Upstream, main moves to a commit whose config has 32 heads.
  const files = [
    await smallFile("config.json", config(32)),
    await smallFile("model.safetensors", "x".repeat(4096)),
  ];
  const second = addCommit(repo, files, ["main"]);
  hub.addRepo(repo);
  const applied = await cp.deployments.apply(tp8);
  assertEquals([applied.result, applied.revision], ["updated", 2]);
  assertEquals(cp.deployments.get("qwen").model_commit, second);
  assertEquals(facts.known(QWEN.model, "main", second)?.attention_heads, 32);
  assertEquals(
    facts.known(QWEN.model, "main", first)?.attention_heads,
    28,
    "the old commit's stay",
  );
  await cp.reconcile();
  assertEquals(cp.replicas().map((r) => r.profile), ["tp8"]);
});

Deno.test("a commit resolved in the background gets its facts in the background, then placement weighs them", async () => {
  const { cp, clock, hub, first } = await setup();
  await hub.offline();
  const applied = await cp.deployments.apply(tp8);
  assertOk(applied.warnings.some((w) => w.message.includes("were not checked")));
  hub.online();
  clock.advance(RETRY_FIRST_MS);
  await cp.reconcile(); // starts resolving (its first try was at apply's pass: none yet)
  await cp.state.modelCommits.settled();
  await cp.reconcile(); // the commit is in: learns its facts
  await cp.state.modelFacts.settled();
  assertEquals(cp.deployments.get("qwen").model_commit, first);
  assertEquals(cp.state.modelFacts.known(QWEN.model, "main", first)?.attention_heads, 28);
  // The replica placed while its facts were unknown stays; a new one is refused for the heads.
  await cp.deployments.scale("qwen", 2);
  await cp.reconcile();
  const [placed, refused] = cp.replicas();
  assertEquals([placed.state, placed.profile, refused.state, refused.profile], [
    "starting",
    "tp8",
    "pending",
    null,
  ]);
  assertStringIncludes(
    JSON.stringify(refused.explanation),
    "Total number of attention heads (28) must be divisible by tensor parallel size (8)",
  );
});
