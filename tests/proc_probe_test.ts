/** /proc probes of tests/proc_probe.ts. */
import { assertEquals } from "./assert.ts";
import { catchesSignal } from "./proc_probe.ts";
import { until } from "./until.ts";

Deno.test("catchesSignal: a shell trapping TERM catches 15, not 10; a process that is gone catches nothing", async () => {
  const sh = new Deno.Command("/bin/sh", {
    args: ["-c", "trap 'exit 0' TERM; echo ready; while :; do sleep 0.1; done"],
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  try {
    const reader = sh.stdout.pipeThrough(new TextDecoderStream()).getReader();
    await until("the trap set", async () => (await reader.read()).value?.includes("ready"));
    reader.releaseLock();
    assertEquals([catchesSignal(sh.pid, 15), catchesSignal(sh.pid, 10)], [true, false]);
    sh.kill("SIGTERM");
    assertEquals((await sh.status).code, 0, "the trap ran");
    assertEquals(catchesSignal(sh.pid, 15), false);
  } finally {
    try {
      sh.kill("SIGKILL");
    } catch {
      // Gone.
    }
    await sh.status;
    await sh.stdout.cancel().catch(() => {});
  }
});
