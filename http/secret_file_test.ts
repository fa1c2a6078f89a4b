/**
 * Secret files: owner-only, written atomically through a fresh file (never
 * through a link at the path or at the temporary name), and no temporary
 * copy of a secret left behind.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertThrows } from "../tests/assert.ts";
import {
  createOwnerOnlyDir,
  narrowToOwner,
  STALE_TEMPORARY_MS,
  writeSecretFile,
} from "./secret_file.ts";

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

Deno.test("writeSecretFile removes the temporary copies a crash left, and only those: a live writer's is kept", () => {
  withDir((dir) => {
    const path = join(dir, "engine_key.yaml");
    const stale = `${path}.tmp-0b1c2d3e-dead-beef-0000-000000000000`;
    Deno.writeTextFileSync(stale, "old secret\n", { mode: 0o600 });
    const old = new Date(Date.now() - STALE_TEMPORARY_MS - 60_000);
    Deno.utimeSync(stale, old, old);
    // Another process's write under way: its temporary is seconds old.
    const live = `${path}.tmp-11111111-2222-3333-4444-555555555555`;
    Deno.writeTextFileSync(live, "their secret\n", { mode: 0o600 });
    Deno.writeTextFileSync(join(dir, "other.tmp-1"), "not ours\n");
    Deno.utimeSync(join(dir, "other.tmp-1"), old, old);
    writeSecretFile(path, "new\n");
    assertEquals(names(dir), [
      "engine_key.yaml",
      "engine_key.yaml.tmp-11111111-2222-3333-4444-555555555555",
      "other.tmp-1",
    ]);
    assertEquals(Deno.readTextFileSync(path), "new\n");
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

Deno.test("createOwnerOnlyDir creates 0700 and leaves an existing directory's mode to narrowToOwner", () => {
  withDir((dir) => {
    const fresh = join(dir, "a", "b");
    createOwnerOnlyDir(fresh);
    assertEquals(Deno.statSync(fresh).mode! & 0o777, 0o700);
    const wide = join(dir, "wide");
    Deno.mkdirSync(wide);
    Deno.chmodSync(wide, 0o755);
    createOwnerOnlyDir(wide);
    assertEquals(Deno.statSync(wide).mode! & 0o777, 0o755);
    assertEquals(narrowToOwner(wide), { was: 0o755, error: null });
    assertEquals(Deno.statSync(wide).mode! & 0o777, 0o700);
    assertEquals(narrowToOwner(wide), null);
    const file = join(dir, "log");
    Deno.writeTextFileSync(file, "");
    Deno.chmodSync(file, 0o644);
    assertEquals(narrowToOwner(file), { was: 0o644, error: null });
    assertEquals(Deno.statSync(file).mode! & 0o777, 0o600);
    assertEquals(narrowToOwner(join(dir, "missing")), null);
    assertThrows(() => createOwnerOnlyDir(join(file, "under-a-file")), Error);
  });
});

Deno.test("narrowToOwner that may not change the mode says why and throws nothing", () => {
  withDir((dir) => {
    Deno.chmodSync(dir, 0o755);
    // Tests run as root, where a real EPERM is hard to get: the chmod refuses instead.
    const refused = narrowToOwner(dir, () => {
      throw new Deno.errors.PermissionDenied("Operation not permitted (os error 1)");
    });
    assertEquals(refused, { was: 0o755, error: "Operation not permitted (os error 1)" });
    assertEquals(Deno.statSync(dir).mode! & 0o777, 0o755);
  });
});
