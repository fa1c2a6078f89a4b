/**
 * One owner per rule (issue #24): each rule that was once written in several
 * places lives in one module, and this table keeps a new copy from creeping
 * back. A rule names the text that writes it, its owner, and the other files
 * allowed to contain that text, each with the reason.
 *
 * The fake engine (dev/fake_engine/) is out of scope on purpose: it runs with
 * `--no-config` and imports only its siblings, as a stand-in for vLLM and
 * SGLang, not llmgw. Tests and benchmarks are out of scope too.
 */
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals } from "../tests/assert.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** One rule and where it may be written. */
export interface RuleOwner {
  /** The rule, as failures name it. */
  rule: string;
  /** The text that writes the rule (matched per line, comment lines skipped). */
  pattern: RegExp;
  /** The module that owns it. */
  owner: string;
  /** Other files that may match, each with why (or the issue item removing it). */
  allowed: Readonly<Record<string, string>>;
  /** The folders the rule covers (`agent/`); absent: every file in scope. */
  within?: readonly string[];
}

/** The rules, with their owners (docs/architecture.md, "Who owns each rule"). */
export const RULE_OWNERS: readonly RuleOwner[] = [
  {
    rule: "the bearer grammar",
    pattern: /\/\^\\s\*Bearer|\/\^Bearer\\s/i,
    owner: "http/tokens.ts",
    allowed: {},
  },
  {
    rule: "constant-time comparison",
    pattern: /\btimingSafeEqual\(/,
    owner: "http/tokens.ts",
    allowed: {},
  },
  {
    rule: "SHA-256 hashing (of tokens)",
    pattern: /createHash\(\s*["']sha256["']|subtle\.digest\(/,
    owner: "http/tokens.ts",
    allowed: {
      "agent/reports.ts": "a report's content hash, not a token",
      "ui/assets.ts": "an asset's cache-busting name",
      "tls/authority.ts": "the CA key's SPKI hash that join tokens carry",
      "supervisor/supervisor.ts": "a shard spec's hash, not a token",
    },
  },
  {
    rule: "the message of anything thrown",
    pattern: /\b(\w+(?:\.\w+)?) instanceof Error \? \1\.message\b/,
    owner: "text/error_message.ts",
    allowed: {},
  },
  {
    rule: "natural order",
    // Ids (`node-2` before `node-10`) sort by the one comparator, never by locale.
    pattern: /new Intl\.Collator\(|localeCompare\([^)]*numeric|\bid\.localeCompare\(/,
    owner: "text/natural_order.ts",
    allowed: {},
  },
  {
    rule: "reading deployment YAML",
    pattern: /\bparseAllDocuments\(|\bparse as parseYaml\b/,
    owner: "deployment/documents.ts",
    allowed: {},
  },
  {
    rule: "shell quoting",
    pattern: /replaceAll\(\s*"'"/,
    owner: "text/shell_quote.ts",
    allowed: {},
  },
  {
    rule: "Prometheus label escaping",
    pattern: /replaceAll\('"', '\\\\"'\)/,
    owner: "text/prometheus_label.ts",
    allowed: {},
  },
  {
    // The gateway had three names for it (BodyReader, ChunkSource, ChunkReader).
    rule: "the body-reader shape",
    pattern: /^\s*read\(\): Promise<ReadableStreamReadResult<Uint8Array>>;/,
    owner: "http/read_limited.ts",
    allowed: {},
  },
  {
    rule: "Prometheus exposition lines",
    pattern: /["`]# (?:HELP|TYPE) /,
    owner: "text/prometheus_exposition.ts",
    allowed: {},
  },
  {
    // Control plane, agent, supervisor and gateway read time through an
    // injected Clock (issue #24 item 5), so tests move it themselves. Nothing
    // there must read the wall clock itself: no allowance. Durations on the
    // monotonic clock (`performance.now()`) are another clock, not this rule.
    rule: "the wall clock",
    pattern: /\bDate\.now\b|\bnew Date\(\)/,
    owner: "time/clock.ts",
    allowed: {},
    within: ["agent/", "supervisor/", "control/", "gateway/"],
  },
  {
    rule: "structured log lines",
    pattern: /console\.(?:error|warn)\(JSON\.stringify\(/,
    owner: "log/log.ts",
    allowed: {},
  },
];

/** Whether a file is in scope: production code, outside the fake engine. */
function inScope(path: string): boolean {
  return !path.startsWith("dev/") && !path.startsWith("tests/") &&
    !path.startsWith("bench/") && !/_test\.tsx?$/.test(path);
}

/** The files of `sources` that match each rule outside its owner, as `rule: path`. */
export function copies(
  sources: ReadonlyMap<string, string>,
  rules: readonly RuleOwner[],
): string[] {
  const found: string[] = [];
  for (const r of rules) {
    for (const [path, source] of sources) {
      if (path === r.owner || !inScope(path)) continue;
      if (r.within !== undefined && !r.within.some((d) => path.startsWith(d))) continue;
      const lines = source.split("\n").filter((l) => !/^\s*(\/\/|\/\*|\*)/.test(l));
      if (lines.some((l) => r.pattern.test(l))) found.push(`${r.rule}: ${path}`);
    }
  }
  return found.sort();
}

const SKIPPED_NAMES = new Set([".git", "node_modules", ".deno", "dist", "fixtures"]);

function tsFiles(dir = ROOT): string[] {
  const files: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory && !SKIPPED_NAMES.has(entry.name)) files.push(...tsFiles(path));
    else if (entry.isFile && /\.tsx?$/.test(entry.name)) {
      files.push(relative(ROOT, path).split(sep).join("/"));
    }
  }
  return files;
}

Deno.test("copies finds a rule written outside its owner, and only there", () => {
  const sources = new Map([
    ["http/tokens.ts", "  return timingSafeEqual(a, b);"],
    [
      "gateway/keys.ts",
      '  const m = /^Bearer\\s+(\\S+)$/i.exec(h);\n  return e instanceof Error ? e.message : ""',
    ],
    ["agent/x.ts", "  // timingSafeEqual( in a comment is no copy\n  const h = hashToken(t);"],
    ["agent/x_test.ts", "  timingSafeEqual(a, b);"],
    ["dev/fake_engine/fake_engine_auth.ts", "  timingSafeEqual(a, b);"],
    ["ui/assets.ts", '  createHash("sha256").update(body);'],
    ["supervisor/x.ts", "  const started = Date.now();"],
    ["gateway/y.ts", "  this.#now = options.now ?? Date.now;"],
    ["cli/z.ts", "  const deadline = Date.now() + 15_000;"],
  ]);
  // Every match outside the owner, allowed or not: the tree test sorts them out.
  assertEquals(copies(sources, RULE_OWNERS), [
    "SHA-256 hashing (of tokens): ui/assets.ts",
    "the bearer grammar: gateway/keys.ts",
    "the message of anything thrown: gateway/keys.ts",
    "the wall clock: gateway/y.ts",
    "the wall clock: supervisor/x.ts",
  ]);
});

Deno.test("each rule of issue #24 has one owner in the tree", () => {
  const files = tsFiles();
  assertEquals(files.includes("http/tokens.ts") && files.includes("main.ts"), true);
  const sources = new Map(files.map((f) => [f, Deno.readTextFileSync(join(ROOT, f))]));
  for (const r of RULE_OWNERS) {
    assertEquals(sources.has(r.owner), true, `${r.rule}: its owner ${r.owner} is gone`);
  }
  const found = copies(sources, RULE_OWNERS);
  const allowed = RULE_OWNERS.flatMap((r) => Object.keys(r.allowed).map((p) => `${r.rule}: ${p}`));
  assertEquals(found.filter((c) => !allowed.includes(c)), [], "rules copied outside their owner");
  // An allowance whose copy is gone must leave the table, so the copy cannot come back unseen.
  const stale = allowed.filter((a) => !found.includes(a));
  assertEquals(stale, [], "allowances no longer needed");
});
