import { assertEquals, assertOk } from "../assert.ts";
import { isAlive } from "../proc_probe.ts";
import { runBounded } from "./bounded_command.ts";

Deno.test("runBounded returns a command's code and output", async () => {
  const r = await runBounded("sh", ["-c", "echo out; echo err >&2; exit 3"]);
  assertEquals(r, {
    code: 3,
    signal: null,
    success: false,
    stdout: "out\n",
    stderr: "err\n",
    timedOut: false,
  });
});

Deno.test("runBounded SIGKILLs a command that runs past its timeout", async () => {
  const r = await runBounded("sh", ["-c", "trap '' TERM; echo started; exec sleep 600"], {
    timeoutMs: 200,
  });
  assertEquals([r.timedOut, r.signal, r.success, r.stdout], [true, "SIGKILL", false, "started\n"]);
});

Deno.test("runBounded returns when a descendant still holds the command's stdout open", async () => {
  // The shell exits at once; its background sleep keeps the pipe open past the drain grace.
  const r = await runBounded("sh", ["-c", "sleep 600 & echo $!"]);
  const orphan = Number(r.stdout.trim());
  try {
    assertEquals([r.code, r.timedOut], [0, false]);
    assertOk(orphan > 0 && isAlive(orphan), `the background sleep ${r.stdout}`);
  } finally {
    if (orphan > 0) Deno.kill(orphan, "SIGKILL");
  }
});
