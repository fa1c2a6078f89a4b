import { assertEquals, assertThrows } from "../../tests/assert.ts";
import type { RepoFile } from "../../models/repo_snapshot.ts";
import { blobLinkTarget, CacheLayout, repoFolderName, UnsafePathError } from "./cache_layout.ts";

const SHA = "a".repeat(64);
const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const file = (path: string): RepoFile => ({ path, size: 10, blobId: "b".repeat(40), sha256: SHA });

Deno.test("repoFolderName is huggingface_hub's models--org--name", () => {
  assertEquals(repoFolderName("julien-c/EsperBERTo-small"), "models--julien-c--EsperBERTo-small");
  assertEquals(repoFolderName("bert-base-cased"), "models--bert-base-cased");
  for (const bad of ["", "a/b/c", "../x", "a/..", "a--b/c", "a/b c", "/a", "a/"]) {
    assertThrows(() => repoFolderName(bad), UnsafePathError, "Cannot use repository id");
  }
});

Deno.test("paths follow the hub cache: blobs/<key>, snapshots/<commit>/<path>, refs/<revision>", () => {
  const layout = new CacheLayout("/cache/");
  const f = file("model-00001-of-00002.safetensors");
  assertEquals(layout.blobPath("org/m", f), `/cache/models--org--m/blobs/${SHA}`);
  assertEquals(
    layout.snapshotPath("org/m", COMMIT, f),
    `/cache/models--org--m/snapshots/${COMMIT}/model-00001-of-00002.safetensors`,
  );
  assertEquals(layout.refPath("org/m", "main"), "/cache/models--org--m/refs/main");
  assertEquals(layout.refPath("org/m", "refs/pr/1"), "/cache/models--org--m/refs/refs/pr/1");
  // A small file is named by its git blob id.
  assertEquals(
    layout.blobPath("org/m", { path: "config.json", size: 2, blobId: "c".repeat(40) }),
    `/cache/models--org--m/blobs/${"c".repeat(40)}`,
  );
});

Deno.test("blobLinkTarget is relative, one ../ more per nested folder", () => {
  assertEquals(blobLinkTarget(file("config.json")), `../../blobs/${SHA}`);
  assertEquals(blobLinkTarget(file("onnx/model.onnx")), `../../../blobs/${SHA}`);
  assertEquals(blobLinkTarget(file("a/b/c.bin")), `../../../../blobs/${SHA}`);
});

Deno.test("a file path, commit, revision or blob key that could leave its folder is refused", () => {
  const layout = new CacheLayout("/cache");
  const cases: [string, string][] = [
    ["../../etc/x", '".." segment'],
    ["/etc/passwd", "absolute"],
    ["a/../../b", '".." segment'],
    ["a//b", "empty"],
    ["./a", '"."'],
    ["a\\..\\b", "backslash"],
    ["", "empty"],
  ];
  for (const [path, why] of cases) {
    const e = assertThrows(() => layout.snapshotPath("org/m", COMMIT, file(path)), UnsafePathError);
    assertEquals(e.message.includes(why), true, `${path}: ${e.message}`);
    assertEquals(e.message.includes("file path of org/m"), true, e.message);
  }
  assertThrows(() => layout.snapshotDir("org/m", "../x"), UnsafePathError, "40 lowercase hex");
  assertThrows(() => layout.refPath("org/m", "../../x"), UnsafePathError, "revision of org/m");
  assertThrows(
    () => layout.blobPath("org/m", { path: "a", size: 1, blobId: "../../x" }),
    UnsafePathError,
    "blob key",
  );
  assertThrows(() => layout.blobPath("org/m", { ...file("a"), size: -1 }), UnsafePathError);
});
