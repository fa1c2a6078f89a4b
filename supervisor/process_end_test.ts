import { assertEquals } from "../tests/assert.ts";
import { endsWithin, exitReason } from "./process_end.ts";

Deno.test("exitReason names a signal by number and name, a code, or a vanished process", () => {
  const cases: [Parameters<typeof exitReason>, string][] = [
    [[{ code: 137, signal: "SIGKILL" }, 7], "killed by signal 9 (SIGKILL)"],
    [[{ code: 0, signal: "SIGSEGV" }, 7], "killed by signal 11 (SIGSEGV)"],
    [[{ code: 0, signal: "SIGWEIRD" }, 7], "killed by signal SIGWEIRD"],
    [[{ code: 1, signal: null }, 7], "exited with code 1"],
    [[null, 4242], "process 4242 is gone"],
    [[null, null], "process ? is gone"],
  ];
  for (const [args, want] of cases) assertEquals(exitReason(...args), want);
});

Deno.test("endsWithin: a child killed now ends; a live one and a live pid do not, within the wait", async () => {
  const spawn = () =>
    new Deno.Command("sleep", { args: ["30"], stdout: "null", stderr: "null" }).spawn();
  const live = spawn();
  const killed = spawn();
  try {
    Deno.kill(killed.pid, "SIGKILL");
    assertEquals(await endsWithin(killed, killed.pid, 0, 2_000), true);
    assertEquals(await endsWithin(live, live.pid, 0, 100), false);
    // Adopted (not a child): /proc says it runs.
    assertEquals(await endsWithin(null, live.pid, undefined, 100), false);
  } finally {
    for (const c of [live, killed]) {
      try {
        c.kill("SIGKILL");
      } catch {
        // Already gone.
      }
      await c.status;
    }
  }
  assertEquals(await endsWithin(null, live.pid, 0, 100), true, "gone once reaped");
});
