import { assertEquals, assertOk, assertThrows } from "../tests/assert.ts";
import { LogTail } from "./log_tail.ts";

Deno.test("LogTail joins lines split across chunks and splits on \\r for progress bars", () => {
  const t = new LogTail({ maxLines: 10, maxBytes: 1000 });
  assertEquals(t.push("INFO starting\nLoading  1"), ["INFO starting"]);
  assertEquals(t.push("0%\rLoading 20%\r\nready\n"), ["Loading  10%", "Loading 20%", "ready"]);
  assertEquals(t.lines(), ["INFO starting", "Loading  10%", "Loading 20%", "ready"]);
});

Deno.test("LogTail stays within its line and byte bounds under a flood", () => {
  const t = new LogTail({ maxLines: 50, maxBytes: 2000 });
  for (let i = 0; i < 10_000; i++) t.push(`line ${i} ${"x".repeat(i % 97)}\n`);
  assertOk(t.lines().length <= 50);
  assertOk(t.bytes <= 2000, `kept ${t.bytes} bytes`);
  assertEquals(t.last(1)[0].startsWith("line 9999 "), true);
  assertOk(t.dropped > 9_900);
  // One endless line (no newline ever) is cut, not kept whole.
  const endless = new LogTail({ maxLines: 5, maxBytes: 100 });
  for (let i = 0; i < 1000; i++) endless.push("y".repeat(50));
  assertOk(endless.bytes <= 100);
});

Deno.test("LogTail refuses limits that cannot hold anything", () => {
  assertThrows(
    () => new LogTail({ maxLines: 0, maxBytes: 10 }),
    RangeError,
    "limits must be positive",
  );
});

Deno.test("LogTail.window: a line keeps its position however many are dropped", () => {
  const tail = new LogTail({ maxLines: 3, maxBytes: 1_000 });
  tail.push("a\nb\nc\nd\ne\n");
  assertEquals(tail.window(2), { log_id: tail.id, first: 3, lines: ["d", "e"] });
  assertEquals(tail.window(10).first, 2);
  assertOk(new LogTail().id !== tail.id, "each tail is its own log");
});

Deno.test("LogTail: hidden lines are counted, not kept, and take no position", () => {
  const tail = new LogTail({ maxLines: 2, maxBytes: 1_000 }, (l) => l.startsWith("probe"));
  assertEquals(tail.push("a\nprobe 1\nb\nprobe 2\nc\n"), ["a", "probe 1", "b", "probe 2", "c"]);
  assertEquals(tail.lines(), ["b", "c"]);
  assertEquals([tail.hidden, tail.dropped], [2, 1]);
  assertEquals(tail.window(2).first, 1);
  assertEquals(new LogTail().hidden, 0);
});
