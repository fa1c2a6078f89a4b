import fc from "fast-check";
import { assertEquals, assertOk } from "../tests/assert.ts";
import {
  advance,
  emptyWindow,
  lineId,
  type LogLine,
  type LogWindow,
  newLineCount,
  resumeAfter,
} from "./log_resume.ts";

Deno.test("newLineCount: the fewest new lines such that the rest overlaps what is known", () => {
  const cases: [string[], string[], number][] = [
    [[], [], 0],
    [[], ["a", "b"], 2],
    [["a", "b"], ["a", "b"], 0],
    [["a", "b"], ["a", "b", "c"], 1],
    [["a", "b", "c"], ["b", "c", "d", "e"], 2],
    [["a", "b"], ["x", "y"], 2],
    // The tail moved on past everything known.
    [["a"], ["c", "d"], 2],
    // A repeat of the last line is new when the tail's head still overlaps.
    [["a", "b", "c"], ["b", "c", "c"], 1],
    // A tail of one repeated line cannot be told from itself unchanged.
    [["c", "c", "c"], ["c", "c", "c"], 0],
  ];
  for (const [known, tail, want] of cases) {
    assertEquals(newLineCount(known, tail), want, `${known} then ${tail}`);
  }
});

/** A log written in bursts and read as an agent answers: its last `limit` lines each time. */
const scenario = fc.record({
  limit: fc.integer({ min: 1, max: 30 }),
  bursts: fc.array(fc.integer({ min: 0, max: 40 }), {
    minLength: 1,
    maxLength: 20,
  }),
});

function run(limit: number, bursts: number[], keep = 100) {
  const log: string[] = [];
  let w = emptyWindow("e1");
  const seen: LogLine[] = [];
  const gaps: boolean[] = [];
  for (const n of bursts) {
    // Unique lines, as log lines with timestamps or counters are.
    for (let i = 0; i < n; i++) {
      log.push(`line ${log.length} ${"x".repeat(log.length % 7)}`);
    }
    const step = advance(w, "s/0", log.slice(-limit), keep);
    w = step.window;
    seen.push(...step.added);
    gaps.push(step.gap);
  }
  return { log, w, seen, gaps };
}

Deno.test("advance: polled before the tail moves past what is known, every line comes once, in order, numbered 1, 2, … (property)", () => {
  fc.assert(fc.property(scenario, ({ limit, bursts }) => {
    const capped = bursts.map((b) => Math.min(b, limit));
    const { log, seen, gaps } = run(limit, capped);
    assertEquals(seen.map((l) => l.text), log);
    assertEquals(seen.map((l) => l.seq), log.map((_, i) => i + 1));
    // Only an answer with no old line left in it may have missed some.
    let known = 0;
    capped.forEach((n, i) => {
      assertEquals(
        gaps[i],
        known > 0 && n === limit,
        `burst ${i}: ${n} lines, answers of ${limit}`,
      );
      known += n;
    });
  }));
});

Deno.test("advance: when more lines came than one answer holds, the gap is flagged and the answer's lines still come once (property)", () => {
  fc.assert(fc.property(scenario, ({ limit, bursts }) => {
    const { log, seen, gaps } = run(limit, bursts);
    // Whatever was missed, nothing is duplicated and order is kept.
    const texts = seen.map((l) => l.text);
    assertEquals(new Set(texts).size, texts.length);
    const positions = texts.map((t) => log.indexOf(t));
    assertOk(
      positions.every((p, i) => p >= 0 && (i === 0 || p > positions[i - 1])),
    );
    // A burst bigger than an answer after something was known is a gap.
    let known = 0;
    bursts.forEach((n, i) => {
      if (known > 0 && n > limit) {
        assertOk(gaps[i], `burst ${i} of ${n} > ${limit}`);
      }
      known += n;
    });
  }));
});

Deno.test("advance: a new shard starts a new log, numbering goes on and the change is a gap", () => {
  let w = advance(emptyWindow("e"), "r.1/0", ["a", "b"], 10).window;
  const step = advance(w, "r.2/0", ["a", "c"], 10);
  assertEquals(step.added, [{ seq: 3, text: "a" }, { seq: 4, text: "c" }]);
  assertOk(step.gap);
  w = step.window;
  assertEquals(w.lines.map((l) => l.seq), [1, 2, 3, 4]);
  assertEquals(advance(w, "r.2/0", ["a", "c"], 10).added, []);
});

Deno.test("advance: the window keeps only its last `keep` lines", () => {
  const step = advance(emptyWindow("e"), "s", ["a", "b", "c", "d"], 2);
  assertEquals(step.window.lines, [{ seq: 3, text: "c" }, {
    seq: 4,
    text: "d",
  }]);
  assertEquals(step.window.next, 5);
});

function windowOf(n: number, keep: number): LogWindow {
  const lines = Array.from({ length: n }, (_, i) => `l${i}`);
  return advance(emptyWindow("ep"), "s", lines, keep).window;
}

Deno.test("resumeAfter: a reader that saw up to any id gets exactly the rest, no line twice, none skipped (property)", () => {
  fc.assert(fc.property(
    fc.integer({ min: 1, max: 60 }),
    fc.integer({ min: 1, max: 60 }),
    fc.nat(),
    (n, keep, pick) => {
      const w = windowOf(n, keep);
      const held = w.lines;
      // The reader saw the window up to some line of it.
      const cut = pick % held.length;
      const before = held.slice(0, cut + 1);
      const r = resumeAfter(w, lineId(w.epoch, before[before.length - 1].seq));
      assertEquals([...before, ...r.lines], held);
      assertOk(!r.gap);
    },
  ));
});

Deno.test("resumeAfter: an id older than the window, another window's, or none", () => {
  const w = windowOf(10, 4); // holds seq 7–10
  assertEquals(w.lines.map((l) => l.seq), [7, 8, 9, 10]);
  const table: [string | null, number[], boolean][] = [
    [null, [7, 8, 9, 10], false],
    ["", [7, 8, 9, 10], false],
    ["ep.6", [7, 8, 9, 10], false],
    ["ep.5", [7, 8, 9, 10], true],
    ["ep.2", [7, 8, 9, 10], true],
    ["ep.9", [10], false],
    ["ep.10", [], false],
    ["ep.11", [7, 8, 9, 10], true],
    ["other.9", [7, 8, 9, 10], true],
    ["garbage", [7, 8, 9, 10], true],
  ];
  for (const [id, seqs, gap] of table) {
    const r = resumeAfter(w, id);
    assertEquals(
      [r.lines.map((l) => l.seq), r.gap],
      [seqs, gap],
      `Last-Event-ID ${id}`,
    );
  }
});

Deno.test("advance with positions: a line repeated word for word is numbered each time it is written", () => {
  const at = (first: number) => ({ log_id: "L", first });
  let w = advance(emptyWindow("e"), "s", ["x", "x"], 10, at(0)).window;
  const step = advance(w, "s", ["x", "x"], 10, at(1));
  assertEquals(step.added.map((l) => l.text), ["x"]);
  assertEquals(step.gap, false);
  w = step.window;
  // The window moved past lines between two polls: a gap, and only the new ones.
  const past = advance(w, "s", ["y", "z"], 10, at(9));
  assertEquals([past.added.map((l) => l.text), past.gap], [["y", "z"], true]);
});
