/**
 * The README's quick start works on a machine with only Node and npm
 * (issue #23 item 7): its two commands are the `npx -y deno@VERSION task …`
 * form, at the Deno version CI installs, and CI (`.ci/run`) runs exactly
 * those two commands, so the form the README shows is the form checked.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** The commands of the first `sh` block under `## Quick start`, comments dropped. */
function quickStartCommands(readme: string): string[] {
  const section = /^## Quick start\n([\s\S]*?)(?=^## )/m.exec(readme)?.[1];
  assertOk(section !== undefined, "README.md has no '## Quick start' section");
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  assertOk(block !== undefined, "the quick start has no sh block");
  return block.split("\n").map((l) => l.replace(/\s+#.*$/, "").trim()).filter((l) => l !== "");
}

/** The Deno version `.ci/run` installs and runs the quick start with. */
function ciDenoVersion(ci: string): string {
  const v = /^DENO_VERSION=(\S+)$/m.exec(ci)?.[1];
  assertOk(v !== undefined, ".ci/run sets no DENO_VERSION");
  return v;
}

Deno.test("README: the quick start is the npx form, at the Deno version CI uses", () => {
  const readme = Deno.readTextFileSync(join(ROOT, "README.md"));
  const version = ciDenoVersion(Deno.readTextFileSync(join(ROOT, ".ci/run")));
  assertEquals(quickStartCommands(readme), [
    `npx -y deno@${version} task dev`,
    `npx -y deno@${version} task test`,
  ]);
});

Deno.test("README: CI runs the quick start's two commands as the README writes them", () => {
  const ci = Deno.readTextFileSync(join(ROOT, ".ci/run"));
  const version = ciDenoVersion(ci);
  // The commands as the shell expands them: QUICK_START holds the npx prefix.
  const prefix = /^QUICK_START="([^"]+)"$/m.exec(ci)?.[1]?.replace("$DENO_VERSION", version);
  assertEquals(prefix, `npx -y deno@${version}`, ".ci/run's QUICK_START");
  const run = ci.split("\n").filter((l) => !l.trimStart().startsWith("#"));
  for (const task of ["dev", "test"]) {
    assertOk(
      run.some((l) => new RegExp(`(^|\\s)\\$QUICK_START task ${task}(\\s|$)`).test(l)),
      `.ci/run runs "$QUICK_START task ${task}" outside a comment`,
    );
  }
  // The test summary CI reports is still parsed from that run's output.
  assertStringIncludes(ci, "$QUICK_START task test 2>&1 | tee /tmp/llmgw-ci-test.log");
  const tasks = JSON.parse(Deno.readTextFileSync(join(ROOT, "deno.json"))).tasks;
  assertOk(typeof tasks.dev === "string" && typeof tasks.test === "string", "deno.json tasks");
});
