import { assertEquals } from "../tests/assert.ts";
import { ProxyHealth } from "./proxy_health.ts";

const A = "https://10.0.0.1:9181";

Deno.test("a down mark keeps requests away for the re-probe time, ends on an answer, and is forgotten after a minute", () => {
  let now = 1_000;
  const h = new ProxyHealth({ now: () => now, reprobeMs: 1_000 });
  assertEquals([h.anyDown, h.isDown(A)], [false, false]);
  h.markDown(A);
  assertEquals([h.anyDown, h.isDown(A)], [true, true]);
  now += 1_000;
  // Lapsed: one request may try it again; the mark is still there until it answers.
  assertEquals([h.isDown(A), h.downOrigins()], [false, [A]]);
  h.markUp(A);
  assertEquals([h.anyDown, h.downOrigins()], [false, []]);
  h.markDown(A);
  now += 60_000;
  assertEquals([h.anyDown, h.downOrigins()], [false, []]);
});

Deno.test("a waiter wakes when a down proxy answers, after its time, or when aborted", async () => {
  const h = new ProxyHealth();
  h.markDown(A);
  const woken = h.changed(60_000);
  h.markUp(A);
  await woken;
  // Another proxy answering that was never down wakes nobody; the time does.
  await h.changed(10);
  const ctl = new AbortController();
  const aborted = h.changed(60_000, ctl.signal);
  ctl.abort();
  await aborted;
  await h.changed(60_000, ctl.signal);
});
