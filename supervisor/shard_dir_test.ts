/**
 * A shard's directory owner-only: created so, an older agent's narrowed,
 * and one that cannot be narrowed warned about rather than refused.
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertThrows } from "../tests/assert.ts";
import { prepareShardDir, tidyShardDir } from "./shard_dir.ts";

function withDir(fn: (dir: string) => void): void {
  const dir = Deno.makeTempDirSync({ prefix: "llmgw_shard_dir_test_" });
  try {
    fn(dir);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

const mode = (path: string) => Deno.statSync(path).mode! & 0o777;
/** Tests run as root, where a real EPERM is hard to get: this chmod refuses instead. */
const refuse = () => {
  throw new Deno.errors.PermissionDenied("Operation not permitted (os error 1)");
};

Deno.test("tidyShardDir narrows an older agent's directory and pid file and removes its fixed-name temporary", () => {
  withDir((root) => {
    const dir = join(root, "s");
    Deno.mkdirSync(dir);
    Deno.chmodSync(dir, 0o755);
    for (const name of ["pid.json", "pid.json.tmp", "engine_key"]) {
      Deno.writeTextFileSync(join(dir, name), "{}\n");
      Deno.chmodSync(join(dir, name), name === "engine_key" ? 0o600 : 0o644);
    }
    assertEquals(tidyShardDir(dir, Deno.chmodSync), []);
    assertEquals([mode(dir), mode(join(dir, "pid.json"))], [0o700, 0o600]);
    assertEquals([...Deno.readDirSync(dir)].map((e) => e.name).sort(), ["engine_key", "pid.json"]);
  });
});

Deno.test("tidyShardDir that may not narrow warns for each path, naming its mode and the fix", () => {
  withDir((root) => {
    const dir = join(root, "s");
    Deno.mkdirSync(dir);
    Deno.chmodSync(dir, 0o755);
    Deno.writeTextFileSync(join(dir, "pid.json"), "{}\n");
    Deno.chmodSync(join(dir, "pid.json"), 0o644);
    const warnings = tidyShardDir(dir, refuse);
    assertEquals(warnings.length, 2);
    assertOk(warnings[0].startsWith(`${dir} is 0755 and cannot be narrowed to 0700`), warnings[0]);
    assertOk(warnings[0].includes("Operation not permitted"), warnings[0]);
    assertOk(warnings[0].endsWith(`(chmod 700 ${dir})`), warnings[0]);
    assertOk(warnings[1].includes("pid.json is 0644 and cannot be narrowed to 0600"), warnings[1]);
    assertEquals(mode(dir), 0o755);
  });
});

Deno.test("prepareShardDir creates 0700, warns where it may not narrow, and throws only when it cannot create", () => {
  withDir((root) => {
    const fresh = join(root, "shards", "a");
    assertEquals(prepareShardDir(fresh, refuse), null);
    assertEquals(mode(fresh), 0o700);
    const old = join(root, "old");
    Deno.mkdirSync(old);
    Deno.chmodSync(old, 0o755);
    assertOk(prepareShardDir(old, refuse)?.includes("cannot be narrowed") === true);
    assertEquals(prepareShardDir(old, Deno.chmodSync), null);
    assertEquals(mode(old), 0o700);
    Deno.writeTextFileSync(join(root, "file"), "");
    assertThrows(() => prepareShardDir(join(root, "file", "s"), Deno.chmodSync), Error);
  });
});
