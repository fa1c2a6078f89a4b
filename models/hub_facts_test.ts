import { inProcessFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../dev/fake_hub/synthetic_model.ts";
import { assertEquals, assertRejects } from "../tests/assert.ts";
import { HubClient } from "./hub_client.ts";
import { HubRepoNotFoundError, HubRevisionNotFoundError } from "./hub_errors.ts";
import { hubClientFactsSource } from "./hub_facts.ts";

Deno.test("a hub model's facts come from its revision's config.json and files, through the fake hub", async () => {
  const repo = await syntheticModel({
    repo: "org/qwen-like",
    preset: "qwen2.5-7b-instruct",
    shards: 2,
    weightBytes: 64_000,
  });
  const hub = inProcessFakeHub({ repos: [repo] });
  const client = new HubClient({ config: { endpoint: hub.endpoint }, fetch: hub.fetch });
  const source = hubClientFactsSource(client);
  const facts = await source.facts("org/qwen-like");
  // The preset's heads and length; the synthetic model's index total (its tensor bytes).
  assertEquals([facts?.attention_heads, facts?.kv_heads, facts?.context_length], [28, 4, 32_768]);
  assertEquals(facts?.weight_bytes, 64_000);
  // At the revision asked for: the hub's own answer for one that does not exist.
  assertEquals((await source.facts("org/qwen-like", "main"))?.attention_heads, 28);
  await assertRejects(
    () => source.facts("org/qwen-like", "no-such-branch"),
    HubRevisionNotFoundError,
  );
  // Paths are not the hub's; an unknown repo is the hub's own answer.
  assertEquals(await source.facts("/models/x"), null);
  await assertRejects(() => source.facts("org/missing"), HubRepoNotFoundError);
});
