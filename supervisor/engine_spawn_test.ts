/**
 * The engine's key and its spawn: a key argparse can take as a value, kept
 * across starts; a log only its owner reads, while the engine keeps the
 * agent's umask for what it writes itself.
 */
import { join } from "node:path";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { adoptedKeyNote, engineKey, spawnEngine } from "./engine_spawn.ts";

function withDir(fn: (dir: string) => Promise<void> | void): Promise<void> {
  const dir = Deno.makeTempDirSync({ prefix: "llmgw_engine_spawn_test_" });
  return Promise.resolve().then(() => fn(dir)).finally(() =>
    Deno.removeSync(dir, { recursive: true })
  );
}

Deno.test("engineKey: never starts with '-', is kept across calls, and replaces a stored '-' key", async () => {
  await withDir((dir) => {
    // The 'ek-' prefix is what keeps a key off '-'; a few keys show it, kept and owner-only.
    for (let i = 0; i < 8; i++) {
      const shard = join(dir, `s${i}`);
      const key = engineKey(shard, true)!;
      assertOk(!key.startsWith("-") && /^[\x21-\x7e]{40,}$/.test(key), key.slice(0, 3));
      assertEquals(engineKey(shard, true), key);
      assertEquals(engineKey(shard, false), key);
      assertEquals(Deno.statSync(join(shard, "engine_key")).mode! & 0o777, 0o600);
      assertEquals(Deno.statSync(shard).mode! & 0o777, 0o700);
    }
    const old = join(dir, "old");
    Deno.mkdirSync(old);
    const dashed = `-${"x".repeat(42)}`;
    Deno.writeTextFileSync(join(old, "engine_key"), dashed + "\n", { mode: 0o600 });
    // Reading (adoption) returns what the running engine has.
    assertEquals(engineKey(old, false), dashed);
    const fresh = engineKey(old, true)!;
    assertOk(fresh !== dashed && !fresh.startsWith("-"), "replaced");
    assertEquals(engineKey(old, false), fresh);
    // An older agent's key that argparse takes is kept (vLLM's compile cache hashes it).
    Deno.writeTextFileSync(join(old, "engine_key"), "kept-key-0123456789abcdef\n");
    assertEquals(engineKey(old, true), "kept-key-0123456789abcdef");
  });
});

/**
 * This process's umask, read from /proc: Deno's umask call with no argument
 * sets the mask to 0 and back, a process-wide change other test files
 * running in parallel could see (tests/parallel_safety_test.ts).
 */
function processUmask(): number {
  const line = Deno.readTextFileSync("/proc/self/status").split("\n")
    .find((l) => l.startsWith("Umask:"));
  if (line === undefined) {
    throw new Error("Cannot read the umask: no Umask line in /proc/self/status");
  }
  return parseInt(line.slice("Umask:".length).trim(), 8);
}

Deno.test({
  name: "spawnEngine creates the log 0600; the engine itself keeps the agent's umask",
  // Under a umask of 077 a leaked umask looks the same as the agent's: the test could not fail.
  ignore: processUmask() === 0o077,
}, async () => {
  await withDir(async (dir) => {
    const log = join(dir, "engine.log");
    const made = join(dir, "made_by_engine");
    const child = spawnEngine(log, ["/bin/sh", "-c", `echo hello; : > "${made}"; umask`], {
      PATH: "/usr/bin:/bin",
    });
    await child.status;
    assertEquals(Deno.statSync(log).mode! & 0o777, 0o600);
    const lines = Deno.readTextFileSync(log).trim().split("\n");
    assertEquals(lines[0], "hello");
    // The agent's umask, not 077: the shell prints it as four octal digits.
    const umask = processUmask();
    assertEquals(parseInt(lines[1], 8), umask);
    assertEquals(Deno.statSync(made).mode! & 0o777, 0o666 & ~umask);
  });
});

Deno.test("adoptedKeyNote: said when an older agent left the key in argv, never with the key", () => {
  const key = "ek-the-secret-key-0123456789";
  const file = { config_file: { flag: "--config", field: "api-key" } };
  const argv = ["python3", "-m", "sglang.launch_server", "--api-key", key];
  const note = adoptedKeyNote(argv, key, file);
  assertOk(note.includes("command line") && note.includes("engine_key.yaml"), note);
  assertOk(!note.includes(key), "the note holds no key");
  assertOk(
    adoptedKeyNote(["vllm", `--api-key=${key}`], key, { env: "VLLM_API_KEY" }).includes(
      "VLLM_API_KEY",
    ),
  );
  // Not in argv, no key, no key form, or an engine that takes it as a flag by design: nothing.
  assertEquals(adoptedKeyNote(["sglang", "--config", "/d/engine_key.yaml"], key, file), "");
  assertEquals(adoptedKeyNote(argv, null, file), "");
  assertEquals(adoptedKeyNote(argv, key, undefined), "");
  assertEquals(adoptedKeyNote(argv, key, { flag: "--api-key" }), "");
});
