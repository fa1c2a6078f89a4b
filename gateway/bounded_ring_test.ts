import fc from "fast-check";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { hash32, HashRing, loadBound, pickBounded } from "./bounded_ring.ts";

const members = (n: number) =>
  Array.from({ length: n }, (_, i) => `replica-${i} http://10.0.0.${i}:9181 s${i}/0`);

Deno.test("loadBound: max(1.25 × mean, mean + 2), the new request counted", () => {
  assertEquals(loadBound(0, 4), 2.25); // mean 0.25: the additive term
  assertEquals(loadBound(39, 4), 12.5); // mean 10: 1.25 × mean
  assertEquals(loadBound(7, 1), 10);
  assertEquals(loadBound(5, 0), 0);
});

Deno.test("HashRing: the same ring from any order of the same members (gateways agree, restarts keep it)", () => {
  fc.assert(fc.property(
    fc.shuffledSubarray(members(8), { minLength: 1 }),
    fc.array(fc.string(), { minLength: 1, maxLength: 50 }),
    (set, keys) => {
      const a = new HashRing(set);
      const b = new HashRing([...set].reverse());
      for (const k of keys) assertEquals(a.home(k), b.home(k));
    },
  ));
});

Deno.test("HashRing: a member leaving remaps only its own keys; one joining takes only keys it now owns", () => {
  fc.assert(fc.property(
    fc.integer({ min: 2, max: 8 }),
    fc.nat(),
    fc.array(fc.string({ minLength: 1 }), { minLength: 50, maxLength: 200 }),
    (n, pick, keys) => {
      const all = members(n);
      const gone = all[pick % n];
      const before = new HashRing(all);
      const after = new HashRing(all.filter((m) => m !== gone));
      for (const k of keys) {
        if (before.home(k) !== gone) assertEquals(after.home(k), before.home(k), `key ${k}`);
      }
      const joined = new HashRing([...all, "newcomer http://10.0.1.1:9181 n/0"]);
      for (const k of keys) {
        const h = joined.home(k);
        assertOk(h === before.home(k) || h === "newcomer http://10.0.1.1:9181 n/0", `key ${k}`);
      }
    },
  ));
});

Deno.test("HashRing: keys spread evenly enough over four replicas", () => {
  const ring = new HashRing(members(4));
  const counts = new Map<string, number>();
  for (let i = 0; i < 20_000; i++) {
    const h = ring.home(`user:conversation ${i}`)!;
    counts.set(h, (counts.get(h) ?? 0) + 1);
  }
  assertEquals(counts.size, 4);
  for (const c of counts.values()) assertOk(c > 20_000 * 0.15 && c < 20_000 * 0.35, `share ${c}`);
});

Deno.test("pickBounded: under any skew no replica takes a request at or over the bound", () => {
  fc.assert(fc.property(
    fc.integer({ min: 1, max: 8 }),
    // Heavily skewed keys: most requests share a handful of sessions.
    fc.array(fc.oneof(fc.constant("hot"), fc.constantFrom("a", "b", "c"), fc.string()), {
      minLength: 1,
      maxLength: 300,
    }),
    fc.array(fc.boolean(), { maxLength: 300 }),
    (n, keys, finishes) => {
      const ring = new HashRing(members(n));
      const load = new Map(members(n).map((m) => [m, { key: m, inFlight: 0 }]));
      const live: { key: string; inFlight: number }[] = [];
      keys.forEach((k, i) => {
        const total = [...load.values()].reduce((s, c) => s + c.inFlight, 0);
        const bound = loadBound(total, n);
        const chosen = pickBounded(ring, k, load, (c) => c.inFlight)!;
        assertOk(chosen.inFlight < bound, `picked at ${chosen.inFlight} with bound ${bound}`);
        chosen.inFlight++;
        live.push(chosen);
        // Some requests finish along the way.
        if (finishes[i] && live.length > 0) live.shift()!.inFlight--;
      });
      const loads = [...load.values()].map((c) => c.inFlight);
      const total = loads.reduce((s, x) => s + x, 0);
      assertOk(Math.max(...loads) <= Math.max(1.25 * (total / n), total / n + 2) + 1);
    },
  ));
});

Deno.test("pickBounded: a key stays on its replica while that one is under the bound", () => {
  const ring = new HashRing(members(4));
  const load = new Map(members(4).map((m) => [m, { key: m, inFlight: 0 }]));
  const first = pickBounded(ring, "user:hello", load, (c) => c.inFlight)!;
  assertEquals(first.key, ring.home("user:hello"));
  first.inFlight = 2; // under max(1.25 × 0.75, 0.75 + 2) = 2.75
  assertEquals(pickBounded(ring, "user:hello", load, (c) => c.inFlight)?.key, first.key);
  first.inFlight = 3; // now over: the next replica clockwise
  const next = pickBounded(ring, "user:hello", load, (c) => c.inFlight)!;
  assertOk(next.key !== first.key);
  assertEquals(next.key, [...ring.walk("user:hello")][1]);
  // Candidates missing from the ring (a tried or suspect one excluded) are passed over.
  const without = new Map([...load].filter(([k]) => k !== next.key && k !== first.key));
  assertOk(
    ![first.key, next.key].includes(
      pickBounded(ring, "user:hello", without, (c) => c.inFlight)!.key,
    ),
  );
  assertEquals(pickBounded(ring, "x", new Map(), () => 0), null);
});

Deno.test("hash32: spreads near-identical inputs", () => {
  const a = hash32("r1#0");
  const b = hash32("r1#1");
  assertOk(a !== b && Math.abs(a - b) > 1_000_000);
  assertEquals(hash32(""), hash32(""));
});
