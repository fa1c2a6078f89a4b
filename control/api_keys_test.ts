import { assertEquals, assertOk } from "../tests/assert.ts";
import { testControl } from "../tests/control_fixture.ts";
import { NotFoundError } from "./errors.ts";
import { hashToken } from "../http/tokens.ts";

Deno.test("an API key is shown once, listed without secrets, given to gateways hashed", async () => {
  const { cp, store } = await testControl();
  const k = await cp.apiKeys.create("team-a", ["qwen"]);
  assertOk(k.key.startsWith("sk-llmgw_"));
  assertEquals(cp.apiKeys.list().map((x) => Object.keys(x).sort()), [[
    "created_at",
    "id",
    "models",
    "name",
  ]]);
  assertEquals(cp.apiKeys.hashes(), [{ id: k.id, hash: await hashToken(k.key), models: ["qwen"] }]);
  const events = JSON.stringify(await cp.events.list());
  assertOk(!events.includes(k.key), "the key never reaches an event");
  assertOk(!JSON.stringify(await store.listApiKeys()).includes(k.key), "nor the store");
  await cp.apiKeys.delete(k.id);
  assertEquals(cp.apiKeys.list(), []);
  let e: unknown = null;
  await cp.apiKeys.delete(k.id).catch((x) => e = x);
  assertOk(e instanceof NotFoundError);
});
