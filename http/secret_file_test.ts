/**
 * Secret files: owner-only, written atomically through a fresh file (never
 * through a link at the path or at the temporary name), and no temporary
 * copy of a secret left behind.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertThrows } from "../tests/assert.ts";
import { ownerOnlyDir, writeSecretFile } from "./secret_file.ts";

function withDir(fn: (dir: string) => void): void {
  const dir = Deno.makeTempDirSync({ prefix: "llmgw_secret_file_test_" });
  try {
    fn(dir);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

const names = (dir: string) => [...Deno.readDirSync(dir)].map((e) => e.name).sort();

Deno.test("writeSecretFile writes 0600 and replaces a symlink at the path without following it", () => {
  withDir((dir) => {
    const target = join(dir, "target");
    Deno.writeTextFileSync(target, "theirs\n");
    const path = join(dir, "secret");
    Deno.symlinkSync(target, path);
    writeSecretFile(path, "s3cret\n");
    assertEquals(Deno.readTextFileSync(target), "theirs\n");
    const st = Deno.lstatSync(path);
    assertOk(st.isFile && !st.isSymlink, "a file of its own");
    assertEquals(st.mode! & 0o777, 0o600);
    assertEquals(Deno.readTextFileSync(path), "s3cret\n");
    assertEquals(names(dir), ["secret", "target"]);
  });
});

Deno.test("writeSecretFile removes the temporary copies a crash left, and only those", () => {
  withDir((dir) => {
    const path = join(dir, "engine_key.yaml");
    const stale = `${path}.tmp-0b1c2d3e-dead-beef-0000-000000000000`;
    Deno.writeTextFileSync(stale, "old secret\n", { mode: 0o600 });
    Deno.writeTextFileSync(join(dir, "other.tmp-1"), "not ours\n");
    writeSecretFile(path, "new\n");
    assertEquals(names(dir), ["engine_key.yaml", "other.tmp-1"]);
  });
});

Deno.test("writeSecretFile that cannot rename leaves no temporary copy and keeps the secret out of the error", () => {
  withDir((dir) => {
    const path = join(dir, "secret");
    Deno.mkdirSync(join(path, "in_the_way"), { recursive: true });
    const e = assertThrows(() => writeSecretFile(path, "s3cret-value\n"), Error);
    assertOk(!String(e).includes("s3cret-value"), "the error holds no secret");
    assertEquals(names(dir), ["secret"]);
  });
});

Deno.test("ownerOnlyDir creates 0700 and narrows a wider directory, saying from what", () => {
  withDir((dir) => {
    const fresh = join(dir, "a", "b");
    assertEquals(ownerOnlyDir(fresh), null);
    assertEquals(Deno.statSync(fresh).mode! & 0o777, 0o700);
    const wide = join(dir, "wide");
    Deno.mkdirSync(wide);
    Deno.chmodSync(wide, 0o755);
    assertEquals(ownerOnlyDir(wide), 0o755);
    assertEquals(Deno.statSync(wide).mode! & 0o777, 0o700);
    assertEquals(ownerOnlyDir(wide), null);
  });
});
