import { assertEquals, assertStringIncludes } from "../../tests/assert.ts";
import type { CompileCacheKeyInput } from "../../engines/compile_cache.ts";
import {
  type EngineCacheView,
  planPressure,
  pressureNeed,
  pressureOrder,
  revisionEvictions,
  type SizedEntry,
  staleVersion,
} from "./engine_cache_plan.ts";

const C1 = "1".repeat(40);
const C2 = "2".repeat(40);

const key = (revision: string | null, version: string | null = "0.11.1"): CompileCacheKeyInput => ({
  engine: "vllm",
  engine_version: version,
  model: "acme/m",
  revision,
  gpu_class: "h100-80g",
  tensor_parallel: 1,
  pipeline_parallel: 1,
  nodes: 1,
});

const entry = (
  dir: string,
  lastUsedMs: number,
  bytes: number,
  k: CompileCacheKeyInput | null = key(C1),
): SizedEntry => ({ dir, key: k, bytes, complete: true, lastUsedMs });

const view = (o: Partial<EngineCacheView> = {}): EngineCacheView => ({
  inUse: new Set(),
  held: new Set([`acme/m@${C1}`]),
  installed: { vllm: "0.11.1" },
  usage: { totalBytes: 1000, freeBytes: 500 },
  marks: { highPercent: 90, lowPercent: 80 },
  ...o,
});

/** The whole plan as a sweep makes it, every candidate sized: revisions, then pressure. */
function plan(entries: SizedEntry[], v: EngineCacheView): string[] {
  const revisions = revisionEvictions(entries, v);
  const gone = new Set(revisions.map((e) => e.entry.dir));
  const freed = entries.filter((e) => gone.has(e.dir)).reduce((n, e) => n + e.bytes, 0);
  const usage = { ...v.usage, freeBytes: v.usage.freeBytes + freed };
  const ordered = pressureOrder(entries.filter((e) => !gone.has(e.dir)), v) as SizedEntry[];
  const p = planPressure(ordered, ordered.length, { ...v, usage });
  return [...revisions, ...p.evictions].map((e) => `${e.entry.dir}:${e.cause}`);
}

Deno.test("plan: each case evicts what an operator expects, in order", () => {
  const cases: {
    name: string;
    entries: SizedEntry[];
    view: EngineCacheView;
    want: string[];
  }[] = [
    {
      name: "under the high watermark, every revision held: nothing",
      entries: [entry("a", 1, 10), entry("b", 2, 10)],
      view: view(),
      want: [],
    },
    {
      name: "a revision gone from the model cache takes its directories, in use or not",
      entries: [entry("gone", 1, 10, key(C2)), entry("kept", 2, 10), entry("busy", 3, 10, key(C2))],
      view: view({ inUse: new Set(["busy"]) }),
      want: ["gone:revision_evicted"],
    },
    {
      name: "no model cache: nothing follows a revision",
      entries: [entry("x", 1, 10, key(C2))],
      view: view({ held: null }),
      want: [],
    },
    {
      name: "no commit in the key (a local path) or no record: never followed",
      entries: [entry("local", 1, 10, key(null)), entry("old", 1, 10, null)],
      view: view({ held: new Set() }),
      want: [],
    },
    {
      name: "over the high watermark: least recently used unused first, down to the low one",
      // 950 used: 150 to free; the in-use oldest stays.
      entries: [
        entry("busy", 0, 500),
        entry("new", 30, 100),
        entry("old", 10, 100),
        entry("mid", 20, 100),
      ],
      view: view({ inUse: new Set(["busy"]), usage: { totalBytes: 1000, freeBytes: 50 } }),
      want: ["old:disk_pressure", "mid:disk_pressure"],
    },
    {
      name: "a version no longer installed goes first, however recent",
      entries: [entry("old", 10, 200), entry("stale", 99, 200, key(C1, "0.10.0"))],
      view: view({ usage: { totalBytes: 1000, freeBytes: 50 } }),
      want: ["stale:disk_pressure"],
    },
    {
      name: "a version whose probe failed is not stale: least recently used decides",
      entries: [entry("old", 10, 200), entry("unknown", 99, 200, key(C1, "0.10.0"))],
      view: view({ usage: { totalBytes: 1000, freeBytes: 50 }, installed: {} }),
      want: ["old:disk_pressure"],
    },
    {
      name: "revision evictions count toward the watermarks",
      // 950 used, the gone revision frees 100: 850 is under 90 %, nothing more.
      entries: [entry("gone", 50, 100, key(C2)), entry("old", 1, 100)],
      view: view({ usage: { totalBytes: 1000, freeBytes: 50 } }),
      want: ["gone:revision_evicted"],
    },
    {
      name: "everything in use: nothing, even over the watermark",
      entries: [entry("a", 1, 900)],
      view: view({ inUse: new Set(["a"]), usage: { totalBytes: 1000, freeBytes: 0 } }),
      want: [],
    },
    {
      name: "pressure from elsewhere: all unused together cannot reach the high mark, none goes",
      // 990 used: 90 to free to reach 900; the caches hold 60.
      entries: [entry("a", 1, 30), entry("b", 2, 30)],
      view: view({ usage: { totalBytes: 1000, freeBytes: 10 } }),
      want: [],
    },
    {
      name: "pressure from elsewhere: a version no longer installed still goes",
      entries: [entry("a", 1, 30), entry("stale", 2, 30, key(C1, "0.10.0"))],
      view: view({ usage: { totalBytes: 1000, freeBytes: 10 } }),
      want: ["stale:disk_pressure"],
    },
    {
      name: "enough to get under the high mark but not the low one: all unused go",
      // 950 used: 50 to reach 900, 150 to reach 800; the caches hold 80.
      entries: [entry("a", 1, 40), entry("b", 2, 40)],
      view: view({ usage: { totalBytes: 1000, freeBytes: 50 } }),
      want: ["a:disk_pressure", "b:disk_pressure"],
    },
  ];
  for (const c of cases) assertEquals(plan(c.entries, c.view), c.want, c.name);
});

Deno.test("pressure: what it could not do is said", () => {
  const usage = { totalBytes: 1000, freeBytes: 10 };
  const v = view({ usage });
  const all = [entry("a", 1, 30), entry("b", 2, 30)];
  assertEquals(planPressure(all, 2, v).elsewhere, { evictableBytes: 60 });
  // One of three sized when the budget ran out: not known to be from elsewhere yet.
  const part = planPressure(all.slice(0, 1), 3, v);
  assertEquals([part.evictions, part.elsewhere, part.unsized], [[], null, true]);
  assertEquals(planPressure(all, 2, view()), { evictions: [], elsewhere: null, unsized: false });
  assertEquals(pressureNeed({ totalBytes: 1000, freeBytes: 100 }, v.marks), null, "at the mark");
  assertEquals(pressureNeed(usage, v.marks), { toHigh: 90, toLow: 190 });
});

Deno.test("pressure: a size whose walk was cut short is a lower bound, never 'from elsewhere'", () => {
  // 100 to free to the high mark, 200 to the low one.
  const v = view({ usage: { totalBytes: 1000, freeBytes: 0 } });
  const cut = (e: SizedEntry): SizedEntry => ({ ...e, complete: false });
  const stale = entry("s", 0, 5, key(C1, "0.10.0"));
  // Every candidate sized, one only in part: the caches may hold more than the disk needs.
  const part = planPressure([stale, cut(entry("a", 1, 30)), entry("b", 2, 30)], 3, v);
  assertEquals(
    [part.evictions.map((e) => e.entry.dir), part.elsewhere, part.unsized],
    [["s"], null, true],
    "not known to be from elsewhere: only the stale version goes, and sizing goes on",
  );
  // A lower bound that is already enough: the caches do relieve the disk.
  const enough = planPressure([cut(entry("a", 1, 250)), entry("b", 2, 30)], 2, v);
  assertEquals([enough.evictions.map((e) => e.entry.dir), enough.unsized], [["a"], false]);
});

Deno.test("plan: the reasons name the revision, the disk and the version", () => {
  const [gone] = revisionEvictions([entry("g", 1, 1, key(C2))], view());
  assertEquals(gone.reason, `acme/m@${C2} is no longer in the model cache`);
  const [stale] = planPressure(
    [entry("s", 1, 100, key(C1, "0.10.0"))],
    1,
    view({ usage: { totalBytes: 1000, freeBytes: 50 } }),
  ).evictions;
  assertStringIncludes(stale.reason, "over the high watermark of 90%");
  assertStringIncludes(stale.reason, "vllm 0.10.0 is no longer installed (now: 0.11.1)");
});

Deno.test("stale: only a known version that differs from the installed one", () => {
  const e = (v: string | null) => entry("d", 1, 1, key(C1, v));
  assertEquals(staleVersion(e("0.10.0"), { vllm: "0.11.1" }), true);
  assertEquals(staleVersion(e("0.11.1"), { vllm: "0.11.1" }), false);
  assertEquals(staleVersion(e(null), { vllm: "0.11.1" }), false);
  assertEquals(staleVersion(e("0.10.0"), null), false);
  assertEquals(staleVersion(entry("d", 1, 1, null), {}), false);
  // Its version probe failed or timed out: not known to be gone.
  assertEquals(staleVersion(e("0.10.0"), {}), false);
  assertEquals(staleVersion(e("0.10.0"), { sglang: "0.5.4" }), false);
});
