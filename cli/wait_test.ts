import { assertEquals } from "../tests/assert.ts";
import { waitUntil } from "./wait.ts";

Deno.test("waitUntil: reads until done, telling each value", async () => {
  let n = 0;
  const seen: number[] = [];
  const r = await waitUntil(() => Promise.resolve(++n), (v) => v === 3, {
    intervalMs: 1,
    timeoutMs: 0,
  }, (v) => seen.push(v));
  assertEquals([r.outcome, r.value, seen], ["done", 3, [1, 2, 3]]);
});

Deno.test("waitUntil: gives up at the limit by its clock, and stops on the signal", async () => {
  let t = 0;
  let reads = 0;
  const timedOut = await waitUntil(
    () => {
      t += 1_000;
      return Promise.resolve(++reads);
    },
    () => false,
    { intervalMs: 1, timeoutMs: 5_000, now: () => t },
  );
  assertEquals([timedOut.outcome, reads], ["timeout", 5]);

  const ac = new AbortController();
  const stopped = await waitUntil(
    () => {
      ac.abort();
      return Promise.resolve("x");
    },
    () => false,
    { intervalMs: 60_000, timeoutMs: 0, signal: ac.signal },
  );
  assertEquals(stopped.outcome, "stopped");
});
