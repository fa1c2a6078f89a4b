import { join } from "node:path";
import { assertEquals, assertOk, assertThrows } from "../tests/assert.ts";
import {
  acquireDevLock,
  DEV_LOCK_FILE,
  DevLockedError,
  DevLockError,
  parseDevLockHolder,
} from "./dev_lock.ts";

Deno.test("dev lock: a second lock on a held directory is refused naming the holder's pid and port", () => {
  const dir = Deno.makeTempDirSync({ prefix: "llmgw-dev-lock-" });
  try {
    const first = acquireDevLock(dir, 7070, 1_000);
    const e = assertThrows(() => acquireDevLock(dir, 9070), DevLockedError) as DevLockedError;
    assertOk(
      e.message.startsWith(`already running on this directory: pid ${Deno.pid}, port 7070 (`),
      e.message,
    );
    assertEquals(e.holder, { pid: Deno.pid, port: 7070, started_at: 1_000 });
    assertEquals((Deno.statSync(join(dir, DEV_LOCK_FILE)).mode! & 0o777).toString(8), "600");
    first.release();
    first.release();
    const second = acquireDevLock(dir, 9070, 2_000);
    assertEquals(
      parseDevLockHolder(Deno.readTextFileSync(second.path)),
      { pid: Deno.pid, port: 9070, started_at: 2_000 },
    );
    second.release();
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("dev lock: a holder killed with SIGKILL leaves no lock behind", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "llmgw-dev-lock-kill-" });
  const script = `import { acquireDevLock } from ${
    JSON.stringify(new URL("./dev_lock.ts", import.meta.url).href)
  };
acquireDevLock(${JSON.stringify(dir)}, 8070);
console.log("locked");
setTimeout(() => {}, 60_000);`;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", script],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  try {
    const reader = child.stdout.getReader();
    const { value } = await reader.read();
    reader.releaseLock();
    assertEquals(new TextDecoder().decode(value).trim(), "locked");
    const e = assertThrows(() => acquireDevLock(dir, 7070), DevLockedError) as DevLockedError;
    assertEquals(e.holder?.pid, child.pid);
    assertEquals(e.holder?.port, 8070);
    child.kill("SIGKILL");
    await child.status;
    // The kernel dropped the dead holder's lock: no stale lock file to clear by hand.
    acquireDevLock(dir, 7070).release();
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
    await child.status;
    await child.stdout.cancel().catch(() => {});
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("dev lock: a lock file that names nobody readable still refuses, without a holder", () => {
  assertEquals(parseDevLockHolder(""), null);
  assertEquals(parseDevLockHolder('{"pid": "1", "port": 7070, "started_at": 1}'), null);
  assertEquals(
    new DevLockedError("/d", null).message,
    "already running on this directory: another llmgw dev (/d); stop it first, or give this one another --dir",
  );
});

Deno.test("dev lock: a lock file that cannot be opened is a DevLockError naming it", () => {
  const dir = Deno.makeTempDirSync({ prefix: "llmgw-dev-lock-dir-" });
  try {
    Deno.mkdirSync(join(dir, DEV_LOCK_FILE));
    assertThrows(
      () => acquireDevLock(dir, 7070),
      DevLockError,
      `Cannot lock ${join(dir, DEV_LOCK_FILE)}: `,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
