import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { Bandwidth } from "./fake_hub_bandwidth.ts";

/** A bucket on a fake clock whose sleeps move the clock (and are recorded). */
function bucket(rate: number | undefined) {
  const clock = new FakeClock(0);
  const sleeps: number[] = [];
  const b = new Bandwidth(rate, () => clock.now(), (ms) => {
    sleeps.push(ms);
    clock.advance(ms);
    return Promise.resolve();
  });
  return { b, clock, sleeps };
}

Deno.test("a capped bucket makes senders wait bytes ÷ rate in all", async () => {
  const { b, sleeps } = bucket(1000);
  for (let i = 0; i < 10; i++) await b.take(500);
  assertEquals(b.granted, 5000);
  // Starting empty, 5000 bytes at 1000 bytes/s wait 5 s, 0.5 s per take.
  assertEquals(sleeps, Array(10).fill(500));
  assertEquals(b.waitedMs, 5000);
});

Deno.test("idle time refills the bucket up to a tenth of a second's bytes", async () => {
  const { b, clock, sleeps } = bucket(10_000);
  clock.advance(60_000);
  await b.take(1000); // a full burst: no wait
  await b.take(1000); // empty again: 0.1 s
  assertEquals(sleeps, [100]);
});

Deno.test("concurrent senders share the cap, served in order", async () => {
  const { b } = bucket(2000);
  await Promise.all([b.take(1000), b.take(1000), b.take(1000), b.take(1000)]);
  assertEquals([b.granted, b.waitedMs], [4000, 2000]);
});

Deno.test("no cap: nothing waits; the cap can change; a cap must be > 0", async () => {
  const { b, sleeps } = bucket(undefined);
  await b.take(1e9);
  assertEquals(sleeps, []);
  b.set(100);
  await b.take(50);
  assertEquals(sleeps, [500]);
  assertThrows(() => b.set(0), RangeError, "must be > 0");
});
