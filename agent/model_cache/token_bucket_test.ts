import { assertEquals, assertRejects, assertThrows } from "../../tests/assert.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { TokenBucket } from "./token_bucket.ts";

/** A bucket whose sleeps move the fake clock and are recorded. */
function bucket(rate: number) {
  const clock = new FakeClock();
  const slept: number[] = [];
  const b = new TokenBucket(rate, clock, (ms) => {
    slept.push(ms);
    clock.advance(ms);
    return Promise.resolve();
  });
  return { clock, slept, b };
}

Deno.test("TokenBucket lets a second's burst through, then holds to the rate", async () => {
  const { clock, slept, b } = bucket(1000);
  const start = clock.now();
  await b.take(1000); // the burst
  assertEquals(slept, []);
  await b.take(500);
  assertEquals(clock.now() - start, 500);
  await b.take(2500); // more than the bucket holds: taken in pieces
  assertEquals(clock.now() - start, 3000);
});

Deno.test("TokenBucket refills with time that passed while idle, up to one second's worth", async () => {
  const { clock, slept, b } = bucket(1000);
  await b.take(1000);
  clock.advance(10_000);
  await b.take(1000);
  assertEquals(slept, []);
  await b.take(1);
  assertEquals(slept, [1]);
});

Deno.test("TokenBucket: 10 takers share the rate rather than each getting it", async () => {
  const { clock, b } = bucket(1000);
  const start = clock.now();
  await Promise.all(Array.from({ length: 10 }, () => b.take(300)));
  // 3000 bytes at 1000 B/s with a 1000-byte burst: 2 s.
  assertEquals(clock.now() - start, 2000);
});

Deno.test("TokenBucket: an aborted take rejects and does not block the next", async () => {
  const { b } = bucket(1000);
  await b.take(1000);
  const stop = new AbortController();
  stop.abort(new Error("stopped"));
  await assertRejects(() => b.take(10, stop.signal), Error, "stopped");
  await b.take(10);
  assertThrows(() => new TokenBucket(0, new FakeClock(), () => Promise.resolve()), RangeError);
});
