/** The endpoint table and the power-of-two-choices pick (design §12). */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { EndpointTable, pickTwoChoices } from "./endpoints.ts";

/** A random source that replays `values` in a loop. */
function replay(...values: number[]): () => number {
  let i = 0;
  return () => values[i++ % values.length];
}

const ep = (replica_id: string, model = "m") => ({
  model,
  replica_id,
  url: `http://127.0.0.1:1${replica_id.slice(1)}`,
});

Deno.test("pickTwoChoices: table of draws and loads", () => {
  const cands = [{ id: "a", outstanding: 3 }, { id: "b", outstanding: 1 }, {
    id: "c",
    outstanding: 2,
  }];
  const cases: { draws: number[]; want: string; why: string }[] = [
    // i = floor(0 * 3) = 0 (a); j = floor(0 * 2) = 0 → bumped to 1 (b): b has fewer.
    { draws: [0, 0], want: "b", why: "a vs b → b (1 < 3)" },
    // i = 2 (c); j = floor(0.99 * 2) = 1 (b): b.
    { draws: [0.99, 0.99], want: "b", why: "c vs b → b" },
    // i = 0 (a); j = 1 → 2 (c): c (2 < 3).
    { draws: [0, 0.99], want: "c", why: "a vs c → c" },
    // i = 2 (c); j = 0 (a): c.
    { draws: [0.99, 0], want: "c", why: "c vs a → c" },
  ];
  for (const { draws, want, why } of cases) {
    assertEquals(pickTwoChoices(cands, replay(...draws))?.id, want, why);
  }
  assertEquals(pickTwoChoices([], Math.random), null);
  assertEquals(pickTwoChoices([{ outstanding: 9 }], Math.random), { outstanding: 9 });
});

Deno.test("pickTwoChoices: the two candidates are always distinct, ties go to the first drawn", () => {
  const cands = [{ id: "a", outstanding: 0 }, { id: "b", outstanding: 0 }];
  for (const r of [0, 0.25, 0.5, 0.75, 0.999]) {
    const first = r < 0.5 ? "a" : "b";
    assertEquals(pickTwoChoices(cands, replay(r, r))?.id, first);
  }
});

Deno.test("choose: the less loaded of two endpoints, deterministic with injected random", () => {
  const t = new EndpointTable({ random: replay(0, 0) });
  t.setEndpoints([ep("r1"), ep("r2")]);
  const picks: string[] = [];
  for (let i = 0; i < 6; i++) {
    const e = t.choose("m")!;
    t.acquire(e);
    picks.push(e.replica_id);
  }
  // With two endpoints both are always drawn, so the load alternates.
  assertEquals(picks, ["r1", "r2", "r1", "r2", "r1", "r2"]);
  assertEquals(t.all().map((e) => e.outstanding), [3, 3]);
  assertEquals(t.choose("nope"), null);
});

Deno.test("acquire: release decrements once, even if called twice", () => {
  const t = new EndpointTable();
  t.setEndpoints([ep("r1")]);
  const e = t.choose("m")!;
  const release = t.acquire(e);
  assertEquals(e.outstanding, 1);
  release();
  release();
  assertEquals(e.outstanding, 0);
  assertEquals(e.dispatched, 1);
});

Deno.test("choose: exclude and suspect endpoints are skipped while others exist", () => {
  const now = 1_000;
  const t = new EndpointTable({ random: replay(0.1, 0.1), now: () => now, suspectMs: 10_000 });
  t.setEndpoints([ep("r1"), ep("r2"), ep("r3")]);
  const [r1, r2, r3] = t.endpoints("m");
  t.markSuspect(r1);
  t.markSuspect(r2);
  for (let i = 0; i < 5; i++) assertEquals(t.choose("m")?.replica_id, "r3");
  // Excluding the only healthy one falls back to the suspects.
  const fallback = t.choose("m", new Set([r3.key]));
  assertOk(fallback !== null && fallback.suspectSince !== null);
  assertEquals(t.choose("m", new Set([r1.key, r2.key, r3.key])), null);
  // All suspect: still served.
  t.markSuspect(r3);
  assertOk(t.choose("m") !== null);
});

Deno.test("setEndpoints: counters survive updates; suspect clears only after suspectMs", () => {
  let now = 0;
  const t = new EndpointTable({ now: () => now, suspectMs: 10_000 });
  t.setEndpoints([ep("r1"), ep("r2")]);
  const r1 = t.endpoints("m")[0];
  t.acquire(r1);
  t.markSuspect(r1);
  now = 5_000;
  t.setEndpoints([ep("r1"), ep("r2")]);
  assertOk(t.endpoints("m")[0] === r1, "same object kept");
  assertEquals(r1.outstanding, 1);
  assertEquals(r1.suspectSince, 0, "too early to clear");
  now = 10_000;
  t.setEndpoints([ep("r2"), ep("r1")]);
  assertEquals(r1.suspectSince, null, "cleared by a fresh list after suspectMs");
  // Dropped and re-added: a fresh, clean entry.
  t.markSuspect(r1);
  t.setEndpoints([ep("r2")]);
  t.setEndpoints([ep("r1"), ep("r2")]);
  const again = t.endpoints("m").find((e) => e.replica_id === "r1")!;
  assertOk(again !== r1);
  assertEquals([again.outstanding, again.suspectSince], [0, null]);
});

Deno.test("setEndpoints: known models, ready models", () => {
  const t = new EndpointTable();
  t.setEndpoints([ep("r1", "b"), ep("r2", "a")], ["a", "b", "c"]);
  assertEquals(t.readyModels(), ["a", "b"]);
  assertOk(t.isKnown("c") && !t.isKnown("d"));
  // Without knownModels, known names stay known; list models are always known.
  t.setEndpoints([ep("r3", "d")]);
  assertEquals(t.readyModels(), ["d"]);
  assertOk(t.isKnown("a") && t.isKnown("c") && t.isKnown("d"));
  // An explicit list replaces them.
  t.setEndpoints([], ["a"]);
  assertEquals(t.readyModels(), []);
  assertOk(t.isKnown("a") && !t.isKnown("d"));
});

Deno.test("choose: prefix affinity keeps a conversation on one replica until it is over the bound", () => {
  const t = new EndpointTable({ random: replay(0.1, 0.9) });
  t.setEndpoints([ep("r1"), ep("r2"), ep("r3"), ep("r4")], ["m"], { m: "prefix_affinity" });
  assertEquals(t.routing("m"), "prefix_affinity");
  const first = t.choose("m", new Set(), "user:plan a trip")!;
  for (let i = 0; i < 5; i++) assertEquals(t.choose("m", new Set(), "user:plan a trip"), first);
  // Busy past max(1.25 × mean, mean + 2): the next replica on the ring takes it.
  t.acquire(first);
  t.acquire(first);
  t.acquire(first);
  const spilled = t.choose("m", new Set(), "user:plan a trip")!;
  assertOk(spilled !== first);
  // Excluded (a retry) or suspect: passed over, the affinity of others unchanged.
  assertOk(t.choose("m", new Set([spilled.key]), "user:plan a trip") !== spilled);
  // No key: least outstanding of two.
  assertOk(t.choose("m", new Set(), null) !== null);
});

Deno.test("choose: the same ring after an update with the same endpoints, and in another gateway", () => {
  const list = [ep("r1"), ep("r2"), ep("r3")];
  const a = new EndpointTable();
  const b = new EndpointTable();
  a.setEndpoints(list, ["m"], { m: "prefix_affinity" });
  b.setEndpoints([...list].reverse(), ["m"], { m: "prefix_affinity" });
  const keys = Array.from({ length: 50 }, (_, i) => `user:conversation ${i}`);
  const homes = keys.map((k) => a.choose("m", new Set(), k)!.replica_id);
  assertEquals(keys.map((k) => b.choose("m", new Set(), k)!.replica_id), homes);
  a.setEndpoints(list, ["m"]); // a later poll: routing kept, ring kept
  assertEquals(keys.map((k) => a.choose("m", new Set(), k)!.replica_id), homes);
});

Deno.test("choose: random and the default policy", () => {
  const t = new EndpointTable({ random: replay(0.99) });
  t.setEndpoints([ep("r1"), ep("r2"), ep("m1", "other")], ["m", "other"], { m: "random" });
  assertEquals(t.choose("m")?.replica_id, "r2");
  assertEquals(t.routing("other"), "least_outstanding");
  assertEquals(t.choose("nope", new Set(), "user:x"), null);
});
