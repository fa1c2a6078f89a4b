/**
 * Access tokens (design §11.2): the format, lookups by id, expiry by the
 * control plane's clock, revocation, and what is stored.
 */
import fc from "fast-check";
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { FakeClock } from "../tests/fake_clock.ts";
import { ACCESS_TOKEN_KINDS, DEFAULT_JOIN_TTL_MS, tokenParts } from "./access_tokens.ts";
import { ControlPlane } from "./control_plane.ts";
import { InvalidInputError, NotFoundError } from "./errors.ts";
import { MemoryStore } from "./store/memory_store.ts";
import { hashToken } from "../http/tokens.ts";

async function world() {
  const clock = new FakeClock();
  const store = new MemoryStore();
  const cp = await ControlPlane.open({ store, clock, reconcileMs: 60_000 });
  return { clock, store, cp };
}

Deno.test("tokenParts: llmgw1.<id>.<secret>[.<ca-hash>]; anything else is not ours", () => {
  const secret = "s".repeat(43);
  const ca = "c".repeat(64);
  assertEquals(tokenParts(`llmgw1.0a1b2c3d4e5f.${secret}`), {
    id: "0a1b2c3d4e5f",
    credential: `llmgw1.0a1b2c3d4e5f.${secret}`,
    caHash: null,
  });
  assertEquals(tokenParts(`llmgw1.0a1b2c3d4e5f.${secret}.${ca}`)?.caHash, ca);
  for (
    const bad of [
      "",
      "llmgw_admin_abc",
      `llmgw2.0a1b2c3d.${secret}`,
      `llmgw1.XYZ.${secret}`,
      `llmgw1.0a1b2c3d.short`,
      `llmgw1.0a1b2c3d.${secret}.${"c".repeat(63)}`,
      `llmgw1.0a1b2c3d.${secret}.${ca}.extra`,
    ]
  ) assertEquals(tokenParts(bad), null, bad);
});

Deno.test("a created token is shown once, stored hashed, and known by its kind", async () => {
  const { cp, store } = await world();
  for (const kind of ACCESS_TOKEN_KINDS) {
    const t = await cp.tokens.create({ kind, description: `${kind} for tests` });
    assertOk(tokenParts(t.token) !== null, t.token);
    assertEquals(await cp.tokens.kindOf(t.token), kind);
    const [stored] = (await store.listTokens()).filter((s) => s.id === t.id);
    assertEquals(stored.hash, await hashToken(t.token));
    assertOk(!JSON.stringify(await store.listTokens()).includes(t.token.split(".")[2]));
    assertOk(!JSON.stringify(cp.tokens.list()).includes(t.token.split(".")[2]));
  }
  assertEquals(cp.tokens.list().map((t) => t.kind).sort(), [...ACCESS_TOKEN_KINDS].sort());
  assertEquals(cp.tokens.list("metrics").length, 1);
});

Deno.test("the id alone, another secret or a join token's CA part never match", async () => {
  const { cp } = await world();
  const t = await cp.tokens.create({ kind: "gateway" });
  const [, id] = t.token.split(".");
  assertEquals(await cp.tokens.kindOf(`llmgw1.${id}.${"x".repeat(43)}`), null);
  assertEquals(await cp.tokens.kindOf(id), null);
  // The CA hash is the agent's to check; the credential still matches with it.
  assertEquals(await cp.tokens.kindOf(`${t.token}.${"a".repeat(64)}`), "gateway");
  fc.assert(
    fc.asyncProperty(fc.string({ maxLength: 200 }), async (junk) => {
      assertEquals(await cp.tokens.kindOf(junk), null);
    }),
    { numRuns: 200 },
  );
});

Deno.test("expiry follows the control plane's clock; join tokens last a day unless told", async () => {
  const { cp, clock } = await world();
  const join = await cp.tokens.create({ kind: "join" });
  assertEquals(join.expires_at, clock.now() + DEFAULT_JOIN_TTL_MS);
  const admin = await cp.tokens.create({ kind: "admin" });
  assertEquals(admin.expires_at, null);
  const short = await cp.tokens.create({ kind: "metrics", ttl_ms: 1_000 });
  assertEquals(cp.tokens.metricsHashes(), [await hashToken(short.token)]);
  clock.advance(1_000);
  assertEquals(await cp.tokens.kindOf(short.token), null, "expired at its instant");
  assertEquals(cp.tokens.metricsHashes(), [], "an expired metrics token is not sent to agents");
  clock.advance(DEFAULT_JOIN_TTL_MS);
  assertEquals(await cp.tokens.kindOf(join.token), null);
  assertEquals(await cp.tokens.kindOf(admin.token), "admin");
  assertOk(cp.tokens.hasLive("admin"));
  assertOk(!cp.tokens.hasLive("join"));
  await assertRejects(() => cp.tokens.create({ kind: "join", ttl_ms: 0 }), InvalidInputError);
  await assertRejects(() => cp.tokens.create({ kind: "join", ttl_ms: -5 }), InvalidInputError);
});

Deno.test("revocation takes effect at once, survives a restart, and leaves an event", async () => {
  const { cp, store, clock } = await world();
  const t = await cp.tokens.create({ kind: "gateway" });
  const keep = await cp.tokens.create({ kind: "gateway" });
  assertEquals((await cp.tokens.revoke(t.id)).kind, "gateway");
  assertEquals(await cp.tokens.kindOf(t.token), null);
  await assertRejects(() => cp.tokens.revoke(t.id), NotFoundError);
  const again = await ControlPlane.open({ store, clock, reconcileMs: 60_000 });
  assertEquals(await again.tokens.kindOf(t.token), null);
  assertEquals(await again.tokens.kindOf(keep.token), "gateway");
  const kinds = (await store.listEvents()).map((e) => e.kind);
  assertEquals(kinds, ["token_created", "token_created", "token_revoked"]);
});
