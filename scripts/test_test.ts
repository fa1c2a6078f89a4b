/** `deno task test`'s file list and its order (scripts/test.ts). */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { LONGEST_FIRST, testArgs } from "./test.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

Deno.test("test task: the longest files first, then every other file once, in parallel", () => {
  assertEquals(testArgs([]), ["test", "--allow-all", "--parallel", ...LONGEST_FIRST, "."]);
  assertEquals(new Set(LONGEST_FIRST).size, LONGEST_FIRST.length, "no file named twice");
  for (const file of LONGEST_FIRST) {
    assertOk(file.endsWith("_test.ts") && Deno.statSync(join(ROOT, file)).isFile, file);
  }
});

Deno.test("test task: arguments replace the file list", () => {
  assertEquals(testArgs(["tests/cluster_test.ts", "--filter", "gateway"]), [
    "test",
    "--allow-all",
    "--parallel",
    "tests/cluster_test.ts",
    "--filter",
    "gateway",
  ]);
});
