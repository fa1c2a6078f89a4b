import fc from "fast-check";
import {
  assertEquals,
  assertOk,
  assertRejects,
  assertStringIncludes,
  assertThrows,
} from "../tests/assert.ts";
import {
  DEFAULT_PORT_RANGE,
  isPortFree,
  parsePortRange,
  PortAllocator,
  type PortRange,
  PortRangeError,
  PortRangeExhaustedError,
  validatePortRange,
} from "./port_allocator.ts";

Deno.test("validatePortRange accepts ranges inside 1024-65535", () => {
  assertEquals(validatePortRange({ from: 20000, to: 28999 }), { from: 20000, to: 28999 });
  assertEquals(validatePortRange({ from: 1024, to: 1024 }), { from: 1024, to: 1024 });
  assertEquals(validatePortRange({ from: 65535, to: 65535 }), { from: 65535, to: 65535 });
});

Deno.test("validatePortRange refuses bad ranges, naming the field", () => {
  const cases: [unknown, string][] = [
    [{ from: 70000, to: 70001 }, "Cannot use ports: from 70000 is past 65535"],
    [{ from: 20000, to: 70000 }, "Cannot use ports: to 70000 is past 65535"],
    [{ from: 80, to: 90 }, "Cannot use ports: from 80 is below 1024"],
    [{ from: 30000, to: 20000 }, "Cannot use ports: from 30000 is past to 20000"],
    [{ to: 20000 }, "Cannot use ports: from is missing"],
    [{ from: 20000 }, "Cannot use ports: to is missing"],
    [{ from: "20000", to: 20001 }, 'from must be a whole number, got "20000"'],
    [{ from: 20000.5, to: 20001 }, "from must be a whole number, got 20000.5"],
    [{ from: 20000, to: 20001, step: 2 }, "unknown field step"],
    [[20000, 20001], 'expected {"from": N, "to": N}, got [20000,20001]'],
    [null, "got null"],
    ["20000-20001", 'got "20000-20001"'],
  ];
  for (const [value, message] of cases) {
    assertThrows(() => validatePortRange(value), PortRangeError, message);
  }
  assertThrows(
    () => validatePortRange({ from: 1, to: 2 }, "agent.json ports"),
    PortRangeError,
    "Cannot use agent.json ports: from 1",
  );
});

Deno.test("parsePortRange reads FROM-TO and names the flag when it cannot", () => {
  assertEquals(parsePortRange("20000-20999"), { from: 20000, to: 20999 });
  assertEquals(parsePortRange(" 20000 - 20999 "), { from: 20000, to: 20999 });
  for (const text of ["20000", "a-b", "20000-", "-1-2", "20000:20999", ""]) {
    assertThrows(() => parsePortRange(text), PortRangeError, "Cannot parse --ports");
  }
  assertThrows(() => parsePortRange("2000-1999"), PortRangeError, "--ports: from 2000 is past to");
  assertThrows(() => parsePortRange("20000-999999"), PortRangeError, "to 999999 is past 65535");
});

Deno.test("the default range keeps clear of ephemeral, Ray, torch and SGLang ports", () => {
  const r = validatePortRange({ ...DEFAULT_PORT_RANGE });
  const inside = (p: number) => r.from <= p && p <= r.to;
  assertOk(r.to < 32768, "below Linux's default ephemeral range");
  assertOk(r.from > 19999, "above Ray's default worker ports");
  for (const p of [8000, 8080, 9100, 29500, 30000]) assertOk(!inside(p), `${p} is outside`);
});

const always = () => true;

Deno.test("allocate: first fit, past held, busy and excluded ports", async () => {
  let now = 1000;
  const a = new PortAllocator({ from: 20000, to: 20019 }, { now: () => now });
  assertEquals(await a.allocate("s1", 3, always), [20000, 20001, 20002]);
  // 20004 is busy: the block moves past it.
  assertEquals(await a.allocate("s2", 3, (p) => p !== 20004), [20005, 20006, 20007]);
  // An owner may hold several blocks: its rendezvous port after its HTTP block.
  assertEquals(await a.allocate("s1", 1, always), [20003]);
  a.exclude(20008, 2000);
  a.exclude(20009);
  assertEquals(await a.allocate("s3", 2, always), [20010, 20011]);
  assertEquals(
    a.held(),
    new Map([["s1", [20000, 20001, 20002, 20003]], ["s2", [20005, 20006, 20007]], [
      "s3",
      [20010, 20011],
    ]]),
  );
  // The timed exclusion ends; the one without a deadline stays.
  now = 2000;
  assertEquals(await a.allocate("s4", 1, (p) => p !== 20004), [20008]);
  assertEquals(await a.allocate("s5", 1, (p) => p !== 20004), [20012]);
  // Releasing makes the ports the first reused.
  assertEquals(a.release("s1"), [20000, 20001, 20002, 20003]);
  assertEquals(a.release("s1"), []);
  assertEquals(await a.allocate("s6", 4, always), [20000, 20001, 20002, 20003]);
});

Deno.test("allocate checks each port of the block it takes, and none it skips", async () => {
  const a = new PortAllocator({ from: 20000, to: 20009 });
  a.reserve("old", [20001]);
  const checked: number[] = [];
  const block = await a.allocate("s", 3, async (p) => {
    await Promise.resolve();
    checked.push(p);
    return p !== 20003;
  });
  assertEquals(block, [20004, 20005, 20006]);
  assertEquals(checked, [20002, 20003, 20004, 20005, 20006]);
});

Deno.test("allocate: a full range is a PortRangeExhaustedError naming range, count and owners", async () => {
  const a = new PortAllocator({ from: 20000, to: 20009 });
  await a.allocate("s1", 4, always);
  await a.allocate("s2", 4, always);
  const e = await assertRejects(
    () => a.allocate("s3", 3, (p) => p !== 20009),
    PortRangeExhaustedError,
    "Cannot allocate 3 consecutive ports for s3: none free in ports 20000-20009",
  ) as PortRangeExhaustedError;
  assertStringIncludes(e.message, "2 owners hold 8");
  assertEquals([e.range, e.count, e.owners], [{ from: 20000, to: 20009 }, 3, 2]);
  assertEquals(await a.allocate("s3", 1, always), [20008], "a smaller block still fits");
  assertEquals(a.held().get("s3"), [20008], "a failed allocation takes nothing");
});

Deno.test("allocate refuses a count that no range could meet, and an empty owner", async () => {
  const a = new PortAllocator({ from: 20000, to: 20009 });
  for (const count of [0, -1, 1.5, 11, NaN]) {
    await assertRejects(() => a.allocate("s", count, always), PortRangeError, "count must be");
  }
  await assertRejects(() => a.allocate("", 1, always), PortRangeError, "owner is empty");
  assertThrows(() => new PortAllocator({ from: 20000, to: 70000 }), PortRangeError, "to 70000");
});

Deno.test("reserve puts back adopted ports, outside the range too, and refuses a clash", async () => {
  const a = new PortAllocator({ from: 20000, to: 20009 });
  a.reserve("adopted", [20000, 20001, 8000]);
  a.reserve("adopted", [20001]); // reserving again what one holds is no clash
  assertEquals(a.held(), new Map([["adopted", [8000, 20000, 20001]]]));
  assertThrows(() => a.reserve("other", [20001]), PortRangeError, "adopted holds it");
  assertThrows(() => a.reserve("other", [0]), PortRangeError, "0 is not a TCP port");
  assertThrows(() => a.reserve("other", [65536]), PortRangeError, "65536 is not a TCP port");
  assertEquals(a.held().has("other"), false, "a refused reserve takes nothing");
  assertEquals(await a.allocate("new", 2, always), [20002, 20003]);
  assertThrows(() => a.exclude(70000), PortRangeError, "Cannot exclude port 70000");
});

Deno.test("held() is a copy", () => {
  const a = new PortAllocator({ from: 20000, to: 20009 });
  a.reserve("s", [20000]);
  a.held().get("s")!.push(1);
  a.held().delete("s");
  assertEquals(a.held(), new Map([["s", [20000]]]));
});

Deno.test("concurrent allocations never overlap", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 8 }),
      fc.array(fc.nat({ max: 5 }), { minLength: 64, maxLength: 64 }),
      async (counts, delays) => {
        const a = new PortAllocator({ from: 20000, to: 20039 });
        let call = 0;
        // Each answer comes after a varied number of turns, so the calls interleave.
        const isFree = async () => {
          for (let i = delays[call++ % delays.length]; i > 0; i--) await Promise.resolve();
          return true;
        };
        const blocks = await Promise.all(counts.map((n, i) => a.allocate(`s${i}`, n, isFree)));
        const all = blocks.flat();
        assertEquals(new Set(all).size, all.length, JSON.stringify(blocks));
        blocks.forEach((b, i) => assertEquals(b.length, counts[i]));
      },
    ),
  );
});

type Op =
  | { op: "allocate"; owner: string; count: number }
  | { op: "release"; owner: string }
  | { op: "exclude"; offset: number };

Deno.test("allocate matches a first-fit model over random allocations, releases, exclusions", async () => {
  const owner = fc.constantFrom("a", "b", "c", "d");
  const op: fc.Arbitrary<Op> = fc.oneof(
    {
      weight: 4,
      arbitrary: fc.record({
        op: fc.constant("allocate" as const),
        owner,
        count: fc.integer({ min: 1, max: 6 }),
      }),
    },
    { weight: 2, arbitrary: fc.record({ op: fc.constant("release" as const), owner }) },
    {
      weight: 1,
      arbitrary: fc.record({ op: fc.constant("exclude" as const), offset: fc.nat({ max: 39 }) }),
    },
  );
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 40 }),
      fc.uniqueArray(fc.nat({ max: 39 }), { maxLength: 10 }),
      fc.array(op, { maxLength: 30 }),
      async (size, busyOffsets, ops) => {
        const range: PortRange = { from: 30000, to: 30000 + size - 1 };
        const busy = new Set(busyOffsets.map((o) => range.from + o));
        const a = new PortAllocator(range);
        const model = new Map<number, string>();
        const excluded = new Set<number>();
        const open = (p: number) => !model.has(p) && !excluded.has(p) && !busy.has(p);
        for (const o of ops) {
          if (o.op === "release") {
            const mine = [...model].filter(([, w]) => w === o.owner).map(([p]) => p);
            assertEquals(a.release(o.owner), mine.sort((x, y) => x - y));
            for (const p of mine) model.delete(p);
          } else if (o.op === "exclude") {
            a.exclude(range.from + o.offset);
            excluded.add(range.from + o.offset);
          } else if (o.count > size) {
            await assertRejects(() => a.allocate(o.owner, o.count, always), PortRangeError);
          } else {
            let want: number[] | null = null;
            for (let s = range.from; s + o.count - 1 <= range.to && want === null; s++) {
              const block = Array.from({ length: o.count }, (_, i) => s + i);
              if (block.every(open)) want = block;
            }
            const checked = new Set<number>();
            const isFree = (p: number) => {
              checked.add(p);
              return !busy.has(p);
            };
            if (want === null) {
              await assertRejects(
                () => a.allocate(o.owner, o.count, isFree),
                PortRangeExhaustedError,
              );
            } else {
              const got = await a.allocate(o.owner, o.count, isFree);
              assertEquals(got, want);
              assertOk(got.every((p) => checked.has(p)), "every port taken was checked");
              for (const p of got) model.set(p, o.owner);
            }
          }
          // Holdings match the model: in range, disjoint, never a busy or excluded port taken.
          const byOwner = new Map<string, number[]>();
          for (const [p, w] of [...model].sort(([x], [y]) => x - y)) {
            byOwner.set(w, [...byOwner.get(w) ?? [], p]);
          }
          const held = a.held();
          assertEquals(new Map([...held].filter(([, ps]) => ps.length > 0)), byOwner);
          const all = [...held.values()].flat();
          assertEquals(new Set(all).size, all.length);
          assertOk(all.every((p) => range.from <= p && p <= range.to && !busy.has(p)));
        }
      },
    ),
  );
});

Deno.test("isPortFree: a port held on 127.0.0.1, 0.0.0.0 or ::1 is not free; closed, it is", () => {
  for (const hostname of ["127.0.0.1", "0.0.0.0", "::1"]) {
    let listener: Deno.TcpListener;
    try {
      listener = Deno.listen({ hostname, port: 0 });
    } catch (e) {
      if (hostname === "::1") continue; // a host without IPv6
      throw e;
    }
    const port = listener.addr.port;
    try {
      assertEquals(isPortFree(port), false, `${hostname}:${port} is held`);
    } finally {
      listener.close();
    }
    assertEquals(isPortFree(port), true, `${hostname}:${port} was let go`);
  }
});

Deno.test("an allocator checking with isPortFree moves past a real listener", async () => {
  const listener = Deno.listen({ hostname: "0.0.0.0", port: 0 });
  const port = listener.addr.port;
  try {
    const range = { from: port, to: Math.min(port + 20, 65535) };
    const a = new PortAllocator(range);
    const [got] = await a.allocate("s", 1, isPortFree);
    assertOk(got > port && got <= range.to, `got ${got}, listener on ${port}`);
  } finally {
    listener.close();
  }
});
