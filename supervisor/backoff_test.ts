import { assertEquals } from "../tests/assert.ts";
import { backoffDelay, DEFAULT_BACKOFF } from "./backoff.ts";

Deno.test("backoffDelay doubles and stops at its cap", () => {
  const policy = { initialMs: 100, maxMs: 1_000, factor: 2 };
  assertEquals([0, 1, 2, 3, 4, 5, 10].map((a) => backoffDelay(a, policy)), [
    0,
    100,
    200,
    400,
    800,
    1000,
    1000,
  ]);
  assertEquals(backoffDelay(100, DEFAULT_BACKOFF), DEFAULT_BACKOFF.maxMs);
});
