/**
 * The command line is the outermost layer (design §3.1): every command lives in
 * cli/, and nothing outside it imports from it but the entry points (main.ts,
 * roles/*.ts) and tests. An import running back up into the CLI would let
 * flags, usage errors and exit codes leak into the roles.
 */
import { join, relative, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { assertEquals } from "../tests/assert.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/**
 * The module specifiers of `source`: static imports and re-exports (type-only
 * too), side-effect imports and dynamic imports with a literal specifier.
 */
function specifiers(source: string): string[] {
  const found: string[] = [];
  const pattern = /\b(?:from|import)\s*\(?\s*["']([^"'\n]+)["']/g;
  for (const m of source.matchAll(pattern)) found.push(m[1]);
  return found;
}

/**
 * The specifiers of the file at `path` (relative to `root`, `/`-separated)
 * that resolve to a module under `root/cli/`.
 */
function cliImports(root: string, path: string, source: string): string[] {
  const cli = join(root, "cli") + sep;
  const base = pathToFileURL(join(root, path));
  return specifiers(source).filter((s) => {
    if (!s.startsWith(".") && !s.startsWith("/") && !s.startsWith("file:")) return false;
    return fileURLToPath(new URL(s, base)).startsWith(cli);
  });
}

/** Whether a file outside cli/ may import from it: the entry points and tests. */
function mayImportCli(path: string): boolean {
  // Tests, and the helpers under tests/ that drive the CLI as a user would.
  return path === "main.ts" || /^roles\/[^/]+\.ts$/.test(path) || path.endsWith("_test.ts") ||
    path.startsWith("tests/");
}

const SKIPPED_DIRS = new Set([".git", "node_modules", "dist", "cli", "tests/fixtures"]);

/** Every .ts file under `root` outside the skipped folders, `/`-separated and relative. */
function tsFiles(root: string, dir = root): string[] {
  const files: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    const path = join(dir, entry.name);
    const rel = relative(root, path).split(sep).join("/");
    if (entry.isDirectory && !SKIPPED_DIRS.has(rel)) files.push(...tsFiles(root, path));
    else if (entry.isFile && entry.name.endsWith(".ts")) files.push(rel);
  }
  return files;
}

Deno.test("cliImports finds the imports that resolve into cli/, in any form", () => {
  const root = join(sep, "repo");
  const cases: [string, string, string[]][] = [
    ["agent/x.ts", 'import { a } from "../cli/usage_error.ts";', ["../cli/usage_error.ts"]],
    ["agent/x.ts", 'import type { A } from "../cli/main.ts";', ["../cli/main.ts"]],
    ["x.ts", 'export { a } from "./cli/a.ts";', ["./cli/a.ts"]],
    ["agent/x.ts", "import {\n  a,\n  b,\n} from '../cli/a.ts';", ["../cli/a.ts"]],
    ["agent/x.ts", 'await import("../cli/a.ts");', ["../cli/a.ts"]],
    ["agent/x.ts", 'import "../cli/a.ts";', ["../cli/a.ts"]],
    ["agent/deep/x.ts", 'import { a } from "../../cli/a.ts";', ["../../cli/a.ts"]],
    // A folder named cli elsewhere, a name that starts with "cli", and bare
    // specifiers are not the CLI.
    ["agent/x.ts", 'import { a } from "./cli/a.ts";', []],
    ["agent/x.ts", 'import { a } from "../client/a.ts";', []],
    ["agent/x.ts", 'import { a } from "../cli_extra.ts";', []],
    ["agent/x.ts", 'import { Hono } from "hono";\nimport z from "npm:zod@4";', []],
    ["agent/x.ts", "// the command line lives in cli/main.ts", []],
  ];
  for (const [path, source, want] of cases) {
    assertEquals(cliImports(root, path, source), want, `${path}: ${source}`);
  }
});

Deno.test("only main.ts, roles/*.ts and tests import from cli/", () => {
  assertEquals(mayImportCli("main.ts"), true);
  assertEquals(mayImportCli("roles/agent.ts"), true);
  assertEquals(mayImportCli("tests/plan_cli_test.ts"), true);
  assertEquals(mayImportCli("roles/deep/x.ts"), false);
  assertEquals(mayImportCli("tests/dev_processes.ts"), true);
  assertEquals(mayImportCli("agent/tests/x.ts"), false);
  assertEquals(mayImportCli("agent/main.ts"), false);

  const files = tsFiles(ROOT);
  // The walk must see the tree it guards, or the check below proves nothing.
  assertEquals(files.includes("main.ts") && files.includes("roles/agent.ts"), true);
  const offenders = files
    .filter((path) => !mayImportCli(path))
    .flatMap((path) =>
      cliImports(ROOT, path, Deno.readTextFileSync(join(ROOT, path))).map((s) => `${path}: ${s}`)
    )
    .sort();
  assertEquals(offenders, [], "files outside cli/ that import from it");
});
