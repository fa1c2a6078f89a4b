/**
 * Architecture tests: the layering rules of design §3.1 as a table, checked
 * over the real import graph of the tree, plus "no import circles" and
 * "every design §N citation names a heading of docs/design.md".
 *
 * The graph is read with a small parser (static imports, re-exports, type
 * imports, side-effect imports and dynamic imports with a literal specifier;
 * comment lines skipped) rather than `deno info`, which would need one
 * process per file and sees only what an entry point reaches.
 */
import { dirname, join, normalize, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals } from "../tests/assert.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/**
 * The module specifiers of `source`: static imports and re-exports (type-only
 * too), side-effect imports and dynamic imports with a literal specifier.
 * Lines that start a comment (`//`, `/*`, ` * `) are skipped, so an example in
 * a module doc is not an import.
 */
export function specifiers(source: string): string[] {
  const found: string[] = [];
  const pattern = /\b(?:from|import)\s*\(?\s*["']([^"'\n]+)["']/g;
  for (const line of source.split("\n")) {
    if (/^\s*(\/\/|\/\*|\*)/.test(line)) continue;
    for (const m of line.matchAll(pattern)) found.push(m[1]);
  }
  return found;
}

/**
 * The repository path (`/`-separated, relative) that `specifier`, imported by
 * the file at `path`, names; null for a bare or remote specifier.
 */
export function resolveLocal(path: string, specifier: string): string | null {
  if (!specifier.startsWith("./") && !specifier.startsWith("../")) return null;
  const resolved = normalize(join(dirname(path), specifier)).split(sep).join("/");
  return resolved.startsWith("../") ? null : resolved;
}

/** The import graph: each file to the repository files it imports. */
export type ImportGraph = Map<string, string[]>;

/** The graph of `files`, read with `read(path)`. */
export function importGraph(files: readonly string[], read: (path: string) => string): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const path of files) {
    const targets = specifiers(read(path))
      .map((s) => resolveLocal(path, s))
      .filter((t): t is string => t !== null);
    graph.set(path, [...new Set(targets)]);
  }
  return graph;
}

/** A test-side file: tests, their helpers under tests/, benchmarks. */
export function isTestSide(path: string): boolean {
  return path.endsWith("_test.ts") || path.endsWith("_test.tsx") || path.startsWith("tests/") ||
    path.startsWith("bench/");
}

/** One layering rule: files matching `from` must not import files matching `to`. */
export interface ImportRule {
  /** What the rule says, as the failure names it. */
  name: string;
  /** Whether the rule governs imports made by the file at `path`. */
  from: (path: string) => boolean;
  /** Whether an import of `target` breaks the rule. */
  to: (target: string) => boolean;
}

const under = (...dirs: string[]) => (path: string) => dirs.some((d) => path.startsWith(`${d}/`));
const production = (test: (path: string) => boolean) => (path: string) =>
  test(path) && !isTestSide(path);

/**
 * The edges of design §3.1: what spawns, listens, stores or talks to a user,
 * and the shared HTTP/TLS plumbing; plus the fake engine and dev assets.
 */
const EDGES = [
  "agent",
  "control",
  "gateway",
  "supervisor",
  "cli",
  "ui",
  "http",
  "tls",
  "dev",
  "testing",
] as const;

/**
 * The rules (design §3.1). The CLI is the outermost layer: flags, usage
 * errors and exit codes must not leak into the roles. `protocol/` is the
 * contract between roles, so it may not depend on any of them. The control
 * plane's domain does not know its dashboard. Production code never loads
 * test code. Placement is pure, and the gateway routes without it.
 */
export const IMPORT_RULES: readonly ImportRule[] = [
  {
    name: "only main.ts, roles/*.ts and tests import from cli/",
    from: (p) =>
      !p.startsWith("cli/") && p !== "main.ts" && !/^roles\/[^/]+\.ts$/.test(p) && !isTestSide(p),
    to: under("cli"),
  },
  {
    name: "protocol/ imports no edge",
    from: production(under("protocol")),
    to: under(...EDGES),
  },
  {
    name: "time/ is a leaf: the clock control, agent and supervisor read imports nothing",
    from: production(under("time")),
    to: () => true,
  },
  {
    name: "the rest of the core imports no edge",
    from: production(
      under(
        "deployment",
        "inventory",
        "discovery",
        "engines",
        "validation",
        "text",
        "time",
        "log",
        "models",
      ),
    ),
    to: under(...EDGES),
  },
  {
    name: "control/ imports no ui/",
    from: production(under("control")),
    to: under("ui"),
  },
  {
    name: "nothing outside tests imports tests/",
    from: (p) => !isTestSide(p),
    to: under("tests"),
  },
  {
    name: "placement/ imports nothing that spawns, listens or stores",
    from: production(under("placement")),
    to: under(...EDGES),
  },
  {
    name: "the gateway does not import placement",
    from: production(under("gateway")),
    to: under("placement"),
  },
  {
    name: "the agent and the control plane share only protocol/",
    from: production(under("agent")),
    to: under("control"),
  },
  {
    name: "the control plane and the agent share only protocol/",
    from: production(under("control")),
    to: under("agent"),
  },
];

/**
 * Imports the rules allow for now, each `rule: importer -> target`, with the
 * issue that removes it. Keep this list short: every entry is debt.
 */
const KNOWN_BREAKS: readonly string[] = [];

/** Each import in `graph` that breaks a rule, as `rule: importer -> target`. */
export function ruleBreaks(graph: ImportGraph, rules: readonly ImportRule[]): string[] {
  const found: string[] = [];
  for (const rule of rules) {
    for (const [path, targets] of graph) {
      if (!rule.from(path)) continue;
      for (const t of targets) if (rule.to(t)) found.push(`${rule.name}: ${path} -> ${t}`);
    }
  }
  return found.sort();
}

/**
 * The import circles of `graph`: each strongly connected set of two or more
 * files (or a file importing itself), its members sorted and joined by " ↔ ".
 */
export function importCircles(graph: ImportGraph): string[] {
  // Tarjan's algorithm, iterative so a deep chain cannot overflow the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[] = [];
  let next = 0;
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work: [string, number][] = [[start, 0]];
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const [v, i] = frame;
      if (i === 0) {
        index.set(v, next);
        low.set(v, next);
        next++;
        stack.push(v);
        onStack.add(v);
      }
      const edges = (graph.get(v) ?? []).filter((w) => graph.has(w));
      if (i < edges.length) {
        frame[1] = i + 1;
        const w = edges[i];
        if (!index.has(w)) work.push([w, 0]);
        else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1][0];
        low.set(parent, Math.min(low.get(parent)!, low.get(v)!));
      }
      if (low.get(v) !== index.get(v)) continue;
      const members: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        members.push(w);
      } while (w !== v);
      if (members.length > 1 || (graph.get(v) ?? []).includes(v)) {
        circles.push(members.sort().join(" ↔ "));
      }
    }
  }
  return circles.sort();
}

/** Every file `graph` reaches from `roots`, roots included. */
export function reachable(graph: ImportGraph, roots: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const todo = [...roots];
  while (todo.length > 0) {
    const v = todo.pop()!;
    if (seen.has(v)) continue;
    seen.add(v);
    todo.push(...(graph.get(v) ?? []));
  }
  return seen;
}

/**
 * Import circles that exist today, with the issue removing each. Keep this
 * list short: every entry is debt.
 */
const KNOWN_CIRCLES: readonly string[] = [];

/**
 * The section numbers of `design`'s headings (`## §7 Placement` gives "7"),
 * and of its numbered rules (`- **§1.1.5 Traffic only to ...**` gives "1.1.5").
 */
export function designSections(design: string): Set<string> {
  const found = new Set<string>();
  for (const m of design.matchAll(/^(?:#+\s+|-\s+\*\*)§(\d+(?:\.\d+)*)\s/gm)) found.add(m[1]);
  return found;
}

/** Each "design §N" citation in `text` (also "design.md §N"), as the number. */
export function designCitations(text: string): string[] {
  return [...text.matchAll(/\bdesign(?:\.md)?\s+§(\d+(?:\.\d+)*)/g)].map((m) => m[1]);
}

/** Folders the walk skips: by name anywhere (vendored code), or by path. */
const SKIPPED_NAMES = new Set([".git", "node_modules", ".deno"]);
const SKIPPED_DIRS = new Set(["dist", "tests/fixtures"]);

/** Every file under `root` whose name ends in one of `endings`, relative and `/`-separated. */
function treeFiles(root: string, endings: readonly string[], dir = root): string[] {
  const files: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    const path = join(dir, entry.name);
    const rel = relative(root, path).split(sep).join("/");
    if (entry.isDirectory) {
      if (!SKIPPED_NAMES.has(entry.name) && !SKIPPED_DIRS.has(rel)) {
        files.push(...treeFiles(root, endings, path));
      }
    } else if (entry.isFile && endings.some((e) => entry.name.endsWith(e))) files.push(rel);
  }
  return files;
}

const read = (path: string) => Deno.readTextFileSync(join(ROOT, path));

/** The whole tree's graph, checked to be the tree it guards. */
function treeGraph(): ImportGraph {
  const graph = importGraph(treeFiles(ROOT, [".ts", ".tsx"]), read);
  // The walk must see the tree it guards, or the checks prove nothing.
  assertEquals(graph.has("main.ts") && graph.has("roles/agent.ts"), true);
  assertEquals((graph.get("main.ts") ?? []).length > 0, true, "main.ts imports nothing?");
  return graph;
}

Deno.test("specifiers and resolveLocal find the files a module imports, in any form", () => {
  const cases: [string, string, string[]][] = [
    ["agent/x.ts", 'import { a } from "../cli/usage_error.ts";', ["cli/usage_error.ts"]],
    ["agent/x.ts", 'import type { A } from "../cli/main.ts";', ["cli/main.ts"]],
    ["x.ts", 'export { a } from "./cli/a.ts";', ["cli/a.ts"]],
    ["agent/x.ts", "import {\n  a,\n  b,\n} from '../cli/a.ts';", ["cli/a.ts"]],
    ["agent/x.ts", 'await import("../cli/a.ts");', ["cli/a.ts"]],
    ["agent/x.ts", 'import "../cli/a.ts";', ["cli/a.ts"]],
    ["agent/deep/x.ts", 'import { a } from "../../cli/a.ts";', ["cli/a.ts"]],
    ["agent/x.ts", 'import { a } from "./cli/a.ts";', ["agent/cli/a.ts"]],
    // Bare and remote specifiers are not files of the tree.
    ["agent/x.ts", 'import { Hono } from "hono";\nimport z from "npm:zod@4";', []],
    ["agent/x.ts", 'import { a } from "../../outside.ts";', []],
    // Comments are not imports, module-doc examples included.
    ["agent/x.ts", "// the command line lives in cli/main.ts", []],
    ["agent/x.ts", ' * import { a } from "./x.ts";', []],
    ["agent/x.ts", '// import { a } from "../cli/a.ts";', []],
  ];
  for (const [path, source, want] of cases) {
    const got = [...importGraph([path], () => source).get(path)!];
    assertEquals(got, want, `${path}: ${source}`);
  }
});

Deno.test("ruleBreaks names the rule, the importer and the target of each bad import", () => {
  const graph: ImportGraph = new Map([
    ["protocol/wire.ts", ["gateway/endpoints.ts", "engines/types.ts"]],
    ["protocol/wire_test.ts", ["gateway/endpoints.ts"]],
    ["control/api.ts", ["ui/mod.ts", "tests/assert.ts"]],
    ["agent/x.ts", ["cli/usage_error.ts"]],
    ["roles/agent.ts", ["cli/main.ts"]],
    ["bench/b.ts", ["tests/until.ts"]],
    ["gateway/proxy.ts", ["placement/place.ts"]],
    ["deployment/load.ts", ["http/tokens.ts", "text/error_message.ts"]],
  ]);
  assertEquals(ruleBreaks(graph, IMPORT_RULES), [
    "control/ imports no ui/: control/api.ts -> ui/mod.ts",
    "nothing outside tests imports tests/: control/api.ts -> tests/assert.ts",
    "only main.ts, roles/*.ts and tests import from cli/: agent/x.ts -> cli/usage_error.ts",
    "protocol/ imports no edge: protocol/wire.ts -> gateway/endpoints.ts",
    "the gateway does not import placement: gateway/proxy.ts -> placement/place.ts",
    "the rest of the core imports no edge: deployment/load.ts -> http/tokens.ts",
  ]);
});

Deno.test("importCircles finds each circle once, however long, and a self-import", () => {
  const graph: ImportGraph = new Map([
    ["a.ts", ["b.ts"]],
    ["b.ts", ["c.ts", "leaf.ts"]],
    ["c.ts", ["a.ts"]],
    ["d.ts", ["e.ts", "a.ts"]],
    ["e.ts", ["d.ts"]],
    ["self.ts", ["self.ts"]],
    ["leaf.ts", ["outside.ts"]],
  ]);
  assertEquals(importCircles(graph), ["a.ts ↔ b.ts ↔ c.ts", "d.ts ↔ e.ts", "self.ts"]);
  assertEquals(importCircles(new Map([["a.ts", ["b.ts"]], ["b.ts", []]])), []);
});

Deno.test("designCitations and designSections read citations and headings", () => {
  assertEquals(designCitations("see design §11.2 and design.md §4, not §5 or design§6"), [
    "11.2",
    "4",
  ]);
  assertEquals(
    [...designSections(
      "# d\n## §3 Roles\n### §3.1 Layers\ntext §9\n- **§3.1.2 Rule.** x\n## §13 O\n",
    )],
    ["3", "3.1", "3.1.2", "13"],
  );
});

Deno.test("the tree keeps the layering rules of design §3.1", () => {
  const breaks = ruleBreaks(treeGraph(), IMPORT_RULES);
  assertEquals(breaks.filter((b) => !KNOWN_BREAKS.includes(b)), [], "imports that break a rule");
  // A known break that is gone must leave the list, so it cannot come back unseen.
  assertEquals(KNOWN_BREAKS.filter((b) => !breaks.includes(b)), [], "known breaks now fixed");
});

Deno.test("reachable follows imports from the roots, each file once", () => {
  const graph: ImportGraph = new Map([
    ["main.ts", ["cli/a.ts"]],
    ["cli/a.ts", ["cli/b.ts", "main.ts"]],
    ["cli/b.ts", []],
    ["tests/t.ts", ["cli/a.ts"]],
  ]);
  assertEquals([...reachable(graph, ["main.ts"])].sort(), ["cli/a.ts", "cli/b.ts", "main.ts"]);
});

Deno.test("the binaries' entry points import nothing from tests/ or dev/", () => {
  const graph = treeGraph();
  const roots = [...graph.keys()].filter((p) =>
    p === "main.ts" || p === "mod.ts" || /^roles\/[^/]+\.ts$/.test(p)
  );
  assertEquals(roots.length >= 3, true, `entry points: ${roots.join(", ")}`);
  const test = [...reachable(graph, roots)]
    .filter((p) => p.startsWith("tests/") || p.startsWith("dev/")).sort();
  // llmgw dev reads dev/ (machines, samples) and starts the fake engine by its path, never by an import.
  assertEquals(test, [], "test or dev-only modules in a production bundle");
});

Deno.test("the tree has no import circles", () => {
  const circles = importCircles(treeGraph());
  assertEquals(circles.filter((c) => !KNOWN_CIRCLES.includes(c)), [], "import circles");
  assertEquals(KNOWN_CIRCLES.filter((c) => !circles.includes(c)), [], "known circles now gone");
});

/** The folders whose files stay under {@link MAX_LINES} lines: split a concept out instead. */
const SIZED_DIRS = ["control", "gateway", "supervisor", "agent"];

/** The most lines of a production file under {@link SIZED_DIRS}. */
const MAX_LINES = 400;

/** Files allowed over {@link MAX_LINES}, each with why it is one concept (none now). */
const LONG_FILES: Readonly<Record<string, string>> = {};

Deno.test("no file under control/, gateway/, supervisor/ or agent/ is over 400 lines", () => {
  const long = treeFiles(ROOT, [".ts", ".tsx"])
    .filter((p) => SIZED_DIRS.some((d) => p.startsWith(`${d}/`)) && !isTestSide(p))
    .map((p) => [p, read(p).split("\n").length - 1] as const)
    .filter(([, lines]) => lines > MAX_LINES);
  assertEquals(
    long.filter(([p]) => !(p in LONG_FILES)).map(([p, n]) => `${p}: ${n} lines`),
    [],
    "files to split",
  );
  // An allowance for a file back under the limit must go.
  const stale = Object.keys(LONG_FILES).filter((p) => !long.some(([q]) => q === p));
  assertEquals(stale, [], "long-file allowances no longer needed");
});

Deno.test("every design §N citation names a heading of docs/design.md", () => {
  const sections = designSections(read("docs/design.md"));
  assertEquals(sections.has("11.2") && sections.has("3.1"), true, "docs/design.md headings");
  const files = treeFiles(ROOT, [".ts", ".tsx", ".md", ".sh", ".yaml", ".yml", ".json"]);
  const stale = files.flatMap((path) =>
    designCitations(read(path)).filter((n) => !sections.has(n)).map((n) => `${path}: design §${n}`)
  );
  assertEquals(stale, [], "citations of sections docs/design.md does not have");
  // Inside docs/design.md a bare "§N" is a citation too.
  const inside = [...read("docs/design.md").matchAll(/(?<![\w.])§(\d+(?:\.\d+)*)/g)]
    .map((m) => m[1].replace(/\.$/, "")).filter((n) => !sections.has(n));
  assertEquals(inside, [], "docs/design.md citing a section it does not have");
});
