import fc from "fast-check";
import { assertEquals } from "../tests/assert.ts";
import { advanceLog } from "./log_window.ts";

Deno.test("advanceLog without positions: the lines after the overlap", () => {
  assertEquals(advanceLog(null, { lines: ["a", "b"] }).lines, ["a", "b"]);
  assertEquals(advanceLog({ lines: ["a", "b", "c"] }, { lines: ["b", "c", "d"] }), {
    lines: ["d"],
    gap: false,
    missed: null,
    restarted: false,
  });
  assertEquals(advanceLog({ lines: ["a", "b"] }, { lines: ["a", "b"] }).lines, []);
  const moved = advanceLog({ lines: ["a", "b"] }, { lines: ["x", "y"] });
  assertEquals([moved.lines, moved.gap], [["x", "y"], true]);
});

Deno.test("advanceLog with positions: exact, repeats included; missed lines counted; a new log", () => {
  const w = (first: number, lines: string[], log_id = "L") => ({ first, lines, log_id });
  // The same line repeated: overlap cannot tell, positions can.
  assertEquals(advanceLog(w(0, ["x", "x"]), w(1, ["x", "x"])).lines, ["x"]);
  assertEquals(advanceLog({ lines: ["x", "x"] }, { lines: ["x", "x"] }).lines, []);
  const past = advanceLog(w(0, ["a", "b"]), w(5, ["f", "g"]));
  assertEquals([past.lines, past.gap, past.missed], [["f", "g"], true, 3]);
  const again = advanceLog(w(40, ["a"]), w(0, ["new"], "M"));
  assertEquals([again.lines, again.restarted, again.gap], [["new"], true, true]);
});

Deno.test("advanceLog with positions: a log read through any sliding windows is printed whole, once (property)", () => {
  fc.assert(fc.property(
    fc.array(fc.constantFrom("x", "y"), { minLength: 1, maxLength: 60 }),
    fc.integer({ min: 1, max: 20 }),
    fc.array(fc.integer({ min: 0, max: 25 }), { minLength: 1, maxLength: 30 }),
    (log, window, steps) => {
      let prev = null;
      const printed: string[] = [];
      let missed = 0;
      for (let end = 0, i = 0; end < log.length; i++) {
        end = Math.min(log.length, end + steps[i % steps.length] + (i > 200 ? 1 : 0));
        const first = Math.max(0, end - window);
        const next = { log_id: "L", first, lines: log.slice(first, end) };
        const step = advanceLog(prev, next);
        printed.push(...step.lines);
        // The first read starts where the window is: what came before it was never shown.
        missed += prev === null ? first : step.missed ?? 0;
        prev = next;
      }
      // Every line is printed once or counted as missed, in order.
      assertEquals(printed.length + missed, log.length);
    },
  ));
});
