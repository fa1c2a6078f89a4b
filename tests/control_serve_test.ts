/**
 * `llmgw control serve` as a process: it refuses a damaged store or one from
 * a newer schema with a clear message instead of running on partial state,
 * and it never prints the tokens it was given.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DatabaseSync } from "node:sqlite";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";

const MAIN = fileURLToPath(new URL("../main.ts", import.meta.url));

async function serve(storeDir: string, seconds = 0): Promise<{ code: number; out: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      MAIN,
      "control",
      "serve",
      "--listen",
      "127.0.0.1:0",
      "--store",
      storeDir,
      "--gateway-listen",
      "off",
    ],
    env: { LLMGW_ADMIN_TOKEN: "admin-secret-token-123", LLMGW_JOIN_TOKEN: "join-secret-token-456" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (seconds > 0) {
    setTimeout(() => {
      try {
        child.kill("SIGTERM");
      } catch {
        // Already gone.
      }
    }, seconds * 1000);
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, out: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

Deno.test("control serve refuses a damaged store and a newer schema, naming the file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeFile(join(dir, "llmgw.db"), crypto.getRandomValues(new Uint8Array(8192)));
    const damaged = await serve(dir);
    assertEquals(damaged.code, 1);
    assertStringIncludes(damaged.out, `Cannot open store ${join(dir, "llmgw.db")}`);
    assertOk(!damaged.out.includes("    at "), "no stack trace");
    await Deno.remove(join(dir, "llmgw.db"));
    const db = new DatabaseSync(join(dir, "llmgw.db"));
    db.exec("PRAGMA user_version = 99");
    db.close();
    const newer = await serve(dir);
    assertEquals(newer.code, 1);
    assertStringIncludes(newer.out, "its schema version 99 is newer than this llmgw");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("control serve starts on a fresh store and never prints the tokens it was given", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const r = await serve(dir, 2);
    assertEquals(r.code, 0);
    assertStringIncludes(r.out, "llmgw control plane listening on http://127.0.0.1:");
    assertOk(!r.out.includes("admin-secret-token-123") && !r.out.includes("join-secret-token-456"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
