/** Retry delays with jitter. */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { DEFAULT_RETRY, retryDelay, sleep } from "./retry.ts";

Deno.test("retry: capped exponential delays with equal jitter", async () => {
  assertEquals(retryDelay(1, DEFAULT_RETRY, () => 0), 500);
  assertEquals(retryDelay(1, DEFAULT_RETRY, () => 0.999999), 1_000);
  assertEquals(retryDelay(3, DEFAULT_RETRY, () => 0), 2_000);
  assertEquals(retryDelay(50, DEFAULT_RETRY, () => 0.999999), 30_000);
  const ctl = new AbortController();
  let woke = false;
  const slept = sleep(60_000, ctl.signal).then(() => woke = true);
  ctl.abort();
  // One turn of the event loop: only the abort can have ended a minute's sleep.
  await new Promise((resolve) => setTimeout(resolve, 0));
  assertOk(woke, "an abort ends the sleep");
  await slept;
});
