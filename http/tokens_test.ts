import { assertEquals, assertOk } from "../tests/assert.ts";
import {
  bearer,
  bearerHashMatches,
  bearerMatches,
  digestMatchesAny,
  hashToken,
  newToken,
  tokenDigest,
  tokensEqual,
} from "./tokens.ts";

Deno.test("bearer: one grammar for every edge", () => {
  const cases: [string | null | undefined, string | null][] = [
    ["Bearer abc", "abc"],
    ["bearer abc", "abc"],
    ["BEARER abc", "abc"],
    ["Bearer \t abc", "abc"],
    ["Bearer abc ", "abc"],
    [" Bearer abc", "abc"],
    ["Bearer sk-llmgw_a.b/c=", "sk-llmgw_a.b/c="],
    ["Bearer", null],
    ["Bearer ", null],
    ["Bearerabc", null],
    ["Bearer abc def", null],
    ["Basic abc", null],
    ["abc", null],
    ["", null],
    [null, null],
    [undefined, null],
  ];
  for (const [header, want] of cases) assertEquals(bearer(header), want, `${header}`);
});

Deno.test("tokenDigest is SHA-256 in lower-case hex; hashToken is the same, as a promise", async () => {
  assertEquals(
    tokenDigest("abc"),
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
  );
  assertEquals(await hashToken("abc"), tokenDigest("abc"));
  assertOk(tokenDigest("abd") !== tokenDigest("abc"));
});

Deno.test("tokensEqual: only the same token, whatever the lengths", () => {
  const token = newToken("llmgw_node");
  assertOk(tokensEqual(token, token));
  for (const other of ["", token.slice(1), `${token}x`, token.toUpperCase(), "x".repeat(10_000)]) {
    assertOk(!tokensEqual(other, token), other.slice(0, 20));
  }
});

Deno.test("bearerMatches: the header carries exactly this token", () => {
  const token = newToken("llmgw_local");
  assertOk(bearerMatches(`Bearer ${token}`, token));
  assertOk(bearerMatches(`bearer ${token} `, token));
  for (const header of [`Bearer ${token}x`, `Basic ${token}`, token, "", null, undefined]) {
    assertOk(!bearerMatches(header, token), `${header}`);
  }
  // An empty expected token never matches a header without one.
  assertOk(!bearerMatches("Bearer", ""));
});

Deno.test("bearerHashMatches: the header's token hashes to a listed hash, any position or case", () => {
  const token = newToken("llmgw_metrics");
  const hash = tokenDigest(token);
  assertOk(bearerHashMatches(`Bearer ${token}`, [hash]));
  assertOk(bearerHashMatches(`Bearer ${token}`, [tokenDigest("a"), hash.toUpperCase()]));
  assertOk(!bearerHashMatches(`Bearer ${token}x`, [hash]));
  assertOk(!bearerHashMatches(`Bearer ${token}`, []));
  // No header hashes the empty string, whose hash may be listed by mistake.
  assertOk(!bearerHashMatches(undefined, [tokenDigest("")]));
  assertOk(digestMatchesAny(hash, [tokenDigest("a"), hash]));
  assertOk(!digestMatchesAny(hash, [tokenDigest("a")]));
});
