/**
 * `deno task test` runs test files in parallel as workers of one process
 * (issue #24 item 9), so what is process-wide must stay untouched by tests:
 * the environment, the working directory, the umask and signal handlers. A
 * test gives a child process its own environment, or passes settings in,
 * instead. This guards test files and test helpers.
 */
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals } from "./assert.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** Calls that change the whole process (names split so this file does not match itself). */
const PROCESS_WIDE = ["env.set", "env.delete", "chdir", "umask", "addSignalListener"]
  .map((call) => `Deno.${call}(`);

/** Test files anywhere and every file under tests/ (fixtures aside). */
function testCode(dir = ROOT): string[] {
  const out: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    const path = join(dir, entry.name);
    const rel = relative(ROOT, path);
    if (entry.isDirectory) {
      if ([".git", "node_modules", "dist", "tests/fixtures"].includes(rel)) continue;
      if (entry.name === "node_modules") continue;
      out.push(...testCode(path));
    } else if (entry.isFile && /\.tsx?$/.test(entry.name)) {
      if (entry.name.endsWith("_test.ts") || rel.startsWith("tests/")) out.push(rel);
    }
  }
  return out;
}

/** `file:line: call` for each process-wide call in `text`. */
function processWideCalls(file: string, text: string): string[] {
  const found: string[] = [];
  for (const [i, line] of text.split("\n").entries()) {
    for (const call of PROCESS_WIDE) {
      if (line.includes(call)) found.push(`${file}:${i + 1}: ${call}`);
    }
  }
  return found;
}

Deno.test("no test changes the environment, directory, umask or signal handlers of the process", () => {
  const files = testCode();
  const found = files.flatMap((f) => processWideCalls(f, Deno.readTextFileSync(join(ROOT, f))));
  assertEquals(found, []);
});

Deno.test("a process-wide call is found with its file and line", () => {
  const text = `const a = 1;\n  ${PROCESS_WIDE[0]}"X", "1");\nDeno.env.get("X");\n`;
  assertEquals(processWideCalls("x_test.ts", text), [`x_test.ts:2: ${PROCESS_WIDE[0]}`]);
});
