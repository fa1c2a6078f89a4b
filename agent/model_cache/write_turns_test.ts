import { assertEquals, assertRejects } from "../../tests/assert.ts";
import { WriteTurns } from "./write_turns.ts";

/** A work that records when it runs and ends when `release` is called. */
function gated(log: string[], name: string) {
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  return {
    work: async () => {
      log.push(`${name} start`);
      await gate;
      log.push(`${name} end`);
      return name;
    },
    release: () => release(),
  };
}

Deno.test("writes to one file take turns in call order; other files do not wait", async () => {
  const turns = new WriteTurns();
  const log: string[] = [];
  const a1 = gated(log, "a1");
  const a2 = gated(log, "a2");
  const b1 = gated(log, "b1");
  const runs = [turns.run("a", a1.work), turns.run("a", a2.work), turns.run("b", b1.work)];
  await Promise.resolve();
  await Promise.resolve();
  assertEquals(log, ["a1 start", "b1 start"]);
  a2.release();
  b1.release();
  await runs[2];
  assertEquals(log.includes("a2 start"), false, "a2 waits for a1 even when ready first");
  a1.release();
  assertEquals(await Promise.all(runs), ["a1", "a2", "b1"]);
  assertEquals(log, ["a1 start", "b1 start", "b1 end", "a1 end", "a2 start", "a2 end"]);
  await Promise.resolve();
  assertEquals(turns.size, 0, "no key is kept once its writes are done");
});

Deno.test("a failed write is the caller's error and does not stop the next turn", async () => {
  const turns = new WriteTurns();
  const failed = turns.run("a", () => Promise.reject(new Error("No space left on device")));
  const next = turns.run("a", () => Promise.resolve(7));
  await assertRejects(() => failed, Error, "No space left");
  assertEquals(await next, 7);
});
