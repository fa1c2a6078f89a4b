/**
 * Tests of the polling helper: what counts as an answer, how errors and the
 * deadline are reported, and that it stops in count even when the clock
 * stands still. Timeouts are small; nothing asserts how long anything took.
 */
import assert from "node:assert/strict";
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "./assert.ts";
import { until, WaitTimeoutError } from "./until.ts";

/**
 * For waits that end with an answer: probes 5 ms apart, and a bound only a
 * busy machine reaches (200 ms failed with test files in parallel).
 */
const FAST = { timeoutMs: 10_000, intervalMs: 5 };

Deno.test("until returns the first answer: a probe that succeeds on its 3rd call is called 3 times", async () => {
  let calls = 0;
  const v = await until("the third call", () => ++calls === 3 ? `call ${calls}` : null, FAST);
  assertEquals(v, "call 3");
  assertEquals(calls, 3);
});

Deno.test("until takes null, undefined and false for 'not yet', but 0 and '' for answers", async () => {
  const pending = [null, undefined, false];
  for (const answer of [0, "", true, { ok: 1 }]) {
    let calls = 0;
    const v = await until("an answer", () => calls < 3 ? pending[calls++] : answer, FAST);
    assertEquals(v, answer);
    assertEquals(calls, 3);
  }
  assertEquals(await until("zero at once", () => 0, FAST), 0);
});

Deno.test("until awaits an async probe", async () => {
  let calls = 0;
  const v = await until("async", async () => {
    await Promise.resolve();
    return ++calls >= 2 ? calls : undefined;
  }, FAST);
  assertEquals(v, 2);
});

Deno.test("until times out naming what it waited for, after a bounded number of probes", async () => {
  let calls = 0;
  const e = await assertRejects(
    () => until("the moon", () => (calls++, false), { timeoutMs: 30, intervalMs: 5 }),
    WaitTimeoutError,
    "timed out after 30 ms waiting for the moon",
  );
  assertEquals(e.message, "timed out after 30 ms waiting for the moon");
  assertOk(calls >= 1 && calls <= 7, `${calls} probes`);
});

Deno.test("until retries a throwing probe and returns once it answers", async () => {
  let calls = 0;
  const v = await until("a server", () => {
    if (++calls < 3) throw new TypeError("connection refused");
    return "up";
  }, FAST);
  assertEquals([v, calls], ["up", 3]);
});

Deno.test("until reports the last error of a probe that always throws, as message and cause", async () => {
  let calls = 0;
  const e = await assertRejects(
    () =>
      until("a server", () => {
        throw new TypeError(`refused ${++calls}`);
      }, { timeoutMs: 30, intervalMs: 5 }),
    WaitTimeoutError,
  );
  assertEquals(
    e.message,
    `timed out after 30 ms waiting for a server (last error: TypeError: refused ${calls})`,
  );
  assertOk(e.cause instanceof TypeError);
  assertEquals(e.cause.message, `refused ${calls}`);
});

Deno.test("until fails at once on an assertion inside the probe: a verdict, not 'not yet'", async () => {
  let calls = 0;
  const e = await assertRejects(
    () =>
      until("a port that stays open", () => {
        calls++;
        assert.ok(false, "the port closed after it opened");
      }, FAST),
    assert.AssertionError,
  );
  assertEquals([e.message, calls], ["the port closed after it opened", 1]);
});

Deno.test("until abandons a probe that hangs past the deadline", async () => {
  let release = () => {};
  const hung = new Promise<string>((r) => release = () => r("late"));
  try {
    const e = await assertRejects(
      () => until("a hung probe", () => hung, { timeoutMs: 20, intervalMs: 5 }),
      WaitTimeoutError,
    );
    assertEquals(
      e.message,
      "timed out after 20 ms waiting for a hung probe (the last probe was still running)",
    );
  } finally {
    release();
  }
});

Deno.test("until appends describe() to the timeout, and survives a describe that throws", async () => {
  const e = await assertRejects(
    () =>
      until("ready", () => null, { timeoutMs: 10, intervalMs: 5, describe: () => "now loading" }),
    WaitTimeoutError,
  );
  assertEquals(e.message, "timed out after 10 ms waiting for ready (now loading)");
  const bad = await assertRejects(
    () =>
      until("ready", () => null, {
        timeoutMs: 10,
        intervalMs: 5,
        describe: () => {
          throw new Error("no status");
        },
      }),
    WaitTimeoutError,
  );
  assertStringIncludes(bad.message, "describe() threw: Error: no status");
});

Deno.test("until stops after ceil(timeout / interval) + 1 probes when the clock stands still", async () => {
  const realNow = Date.now;
  const frozen = realNow();
  Date.now = () => frozen;
  let calls = 0;
  try {
    await assertRejects(
      () => until("frozen time", () => (calls++, null), { timeoutMs: 20, intervalMs: 5 }),
      WaitTimeoutError,
      "timed out after 20 ms waiting for frozen time",
    );
  } finally {
    Date.now = realNow;
  }
  assertEquals(calls, 5);
});

Deno.test("until refuses a timeout or interval that is not a positive number", async () => {
  for (
    const [options, name] of [
      [{ timeoutMs: 0 }, "timeoutMs"],
      [{ timeoutMs: -1 }, "timeoutMs"],
      [{ timeoutMs: Infinity }, "timeoutMs"],
      [{ intervalMs: 0 }, "intervalMs"],
      [{ intervalMs: NaN }, "intervalMs"],
    ] as const
  ) {
    let calls = 0;
    const e = await assertRejects(
      () => until("x", () => ++calls, options),
      RangeError,
      `Cannot wait for x: ${name} must be a positive number of milliseconds`,
    );
    assertOk(e.message.endsWith(`got ${Object.values(options)[0]}`), e.message);
    assertEquals(calls, 0, "no probe runs with bad options");
  }
});
