import fc from "fast-check";
import { assertEquals } from "../tests/assert.ts";
import { newLogLines } from "./log_follow.ts";

Deno.test("newLogLines: only lines after the overlap are new", () => {
  assertEquals(newLogLines([], ["a", "b"]), ["a", "b"]);
  assertEquals(newLogLines(["a", "b", "c"], ["b", "c", "d"]), ["d"]);
  assertEquals(newLogLines(["a", "b"], ["a", "b"]), []);
  assertEquals(newLogLines(["a", "b"], ["x", "y"]), ["x", "y"]);
});

Deno.test("newLogLines: a log read through a sliding window is printed whole, once (property)", () => {
  fc.assert(fc.property(
    fc.array(fc.integer({ min: 0, max: 1_000_000 }), { minLength: 1, maxLength: 60 }),
    fc.integer({ min: 3, max: 20 }),
    fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 30 }),
    (ids, window, steps) => {
      // Distinct lines (a log with sequence numbers, as engines write timestamps).
      const log = ids.map((n, i) => `${i} ${n}`);
      let shown: string[] = [];
      let printed: string[] = [];
      // Each read moves at most a window: nothing falls between two reads.
      for (let end = 0, i = 0; end < log.length; i++) {
        end = Math.min(log.length, end + steps[i % steps.length]);
        const tail = log.slice(Math.max(0, end - window), end);
        printed = printed.concat(newLogLines(shown, tail));
        shown = tail;
      }
      assertEquals(printed, log);
    },
  ));
});
