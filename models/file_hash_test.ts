import { assertEquals } from "../tests/assert.ts";
import { gitBlobHash, hashBytes, sha256Hash } from "./file_hash.ts";

const encoder = new TextEncoder();

Deno.test("gitBlobHash matches git's own blob ids", () => {
  // `printf 'hello\n' | git hash-object --stdin` and `git hash-object /dev/null`.
  assertEquals(
    hashBytes(gitBlobHash(6), encoder.encode("hello\n")),
    "ce013625030ba8dba906f756967f9e9ca394464a",
  );
  assertEquals(
    hashBytes(gitBlobHash(0), new Uint8Array()),
    "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
  );
});

Deno.test("sha256Hash is SHA-256, the same fed whole or in chunks", () => {
  assertEquals(
    hashBytes(sha256Hash(), encoder.encode("hello\n")),
    "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
  );
  const h = sha256Hash();
  h.update(encoder.encode("hel"));
  h.update(encoder.encode("lo\n"));
  assertEquals(h.hex(), "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
});
