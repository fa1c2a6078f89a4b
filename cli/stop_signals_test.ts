/**
 * The stop signal is listened for SIGTERM first: Deno handles SIGHUP, SIGINT
 * and SIGTERM from the first listener on, and a SIGTERM before its own
 * listener ends the process (cli/stop_signals.ts).
 */
import { assertEquals } from "../tests/assert.ts";
import { stopSignal } from "./stop_signals.ts";

Deno.test("stopSignal listens for SIGTERM before any other signal, and resolves with the one received", async () => {
  const added: [Deno.Signal, () => void][] = [];
  const got = stopSignal(["SIGINT", "SIGHUP", "SIGTERM"], (s, h) => added.push([s, h]));
  assertEquals(added.map(([s]) => s), ["SIGTERM", "SIGINT", "SIGHUP"]);
  added[2][1]();
  assertEquals(await got, "SIGHUP");
});

Deno.test("a SIGTERM in a child that listens through stopSignal ends it by its handler, not by the signal", async () => {
  const code = `
    import { stopSignal } from ${
    JSON.stringify(new URL("./stop_signals.ts", import.meta.url).href)
  };
    const stopped = stopSignal();
    console.log("listening");
    console.log("stopped by", await stopped);
  `;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-config", code],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let out = "";
    while (!out.includes("listening")) {
      const { value, done } = await reader.read();
      if (done) break;
      out += value;
    }
    child.kill("SIGTERM");
    for (let r = await reader.read(); !r.done; r = await reader.read()) out += r.value;
    const status = await child.status;
    assertEquals([status.code, out.trim().split("\n").at(-1)], [0, "stopped by SIGTERM"]);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // Gone.
    }
    await child.stderr.cancel().catch(() => {});
  }
});
