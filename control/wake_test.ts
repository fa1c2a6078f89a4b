import { assertEquals, assertThrows } from "../tests/assert.ts";
import { Wake } from "./wake.ts";

Deno.test("a wake runs its one answer per kick, and refuses a second reconciler", () => {
  const wake = new Wake();
  wake.kick(); // nobody answers yet: nothing happens
  let passes = 0;
  wake.answerWith(() => passes++);
  wake.kick();
  wake.kick();
  assertEquals(passes, 2);
  assertThrows(() => wake.answerWith(() => {}), Error, "a reconciler answers it already");
});
