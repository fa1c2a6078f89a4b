/**
 * The peer plan (issue #25 item 3): a table of cases, then properties over
 * random fleets: every host has a source, the origin is the first source of
 * at most `originFetchers` hosts (none when a host already holds the
 * revision), peers are hosts that can serve and come before the asker, and
 * no host's sources lead back to itself.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { type HostSources, peerOrder, type PlanHost, planPeerSources } from "./peer_plan.ts";

const host = (node: string, holds = false, canServe = true): PlanHost => ({
  node,
  holds,
  canServe,
});

function table(plan: Map<string, HostSources>): Record<string, string> {
  return Object.fromEntries(
    [...plan].map(([node, s]) => [
      node,
      [...s.peers, ...(s.origin ? ["origin"] : [])].join(" > ") || "-",
    ]),
  );
}

Deno.test("peer plan: table", () => {
  const cases: [string, PlanHost[], Record<string, string>, number?][] = [
    ["one host fetches from the origin", [host("n1")], { n1: "origin" }],
    ["four hosts: one from the origin, the rest a chain", [
      host("n3"),
      host("n1"),
      host("n4"),
      host("n2"),
    ], {
      n1: "origin",
      n2: "n1 > origin",
      n3: "n2 > n1 > origin",
      n4: "n3 > n2 > n1 > origin",
    }],
    ["ancestors are capped at three", [
      host("n1"),
      host("n2"),
      host("n3"),
      host("n4"),
      host("n5"),
    ], {
      n1: "origin",
      n2: "n1 > origin",
      n3: "n2 > n1 > origin",
      n4: "n3 > n2 > n1 > origin",
      n5: "n4 > n3 > n2 > origin",
    }],
    ["a holder is the root; the origin only last", [host("n1"), host("n2", true), host("n3")], {
      n2: "-",
      n1: "n2 > origin",
      n3: "n1 > n2 > origin",
    }],
    ["two holders: two chains", [
      host("a", true),
      host("b", true),
      host("c"),
      host("d"),
      host("e"),
    ], {
      a: "-",
      b: "-",
      c: "a > origin",
      d: "b > origin",
      e: "c > a > origin",
    }],
    ["a host that cannot serve is a leaf, never a root or a parent", [
      host("n1", false, false),
      host("n2"),
      host("n3"),
    ], {
      n2: "origin",
      n3: "n2 > origin",
      n1: "n3 > n2 > origin",
    }],
    ["a holder that cannot serve is no root", [host("h", true, false), host("n1")], {
      h: "-",
      n1: "origin",
    }],
    [
      "nobody can serve: each from the origin",
      [host("n1", false, false), host("n2", false, false)],
      {
        n1: "origin",
        n2: "origin",
      },
    ],
    ["two origin fetchers", [host("n1"), host("n2"), host("n3"), host("n4")], {
      n1: "origin",
      n2: "origin",
      n3: "n1 > origin",
      n4: "n2 > origin",
    }, 2],
    ["the host furthest along leads, then the next: nobody waits behind a newcomer", [
      host("n1"),
      { ...host("n2"), bytesDone: 10 },
      { ...host("n3"), bytesDone: 30 },
      host("n4"),
    ], {
      n3: "origin",
      n2: "n3 > origin",
      n1: "n2 > n3 > origin",
      n4: "n1 > n2 > n3 > origin",
    }],
    ["a holder still leads a host under way", [
      { ...host("n1"), bytesDone: 50 },
      host("n2", true),
    ], {
      n2: "-",
      n1: "n2 > origin",
    }],
    ["a host listed twice counts once", [host("n1"), host("n1"), host("n2")], {
      n1: "origin",
      n2: "n1 > origin",
    }],
  ];
  for (const [name, hosts, want, originFetchers] of cases) {
    const got = table(planPeerSources(hosts, { originFetchers }));
    assertEquals(got, want, name);
  }
});

function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

Deno.test("peer plan: properties over random fleets (sources, origin bytes, no cycles)", () => {
  for (let seed = 1; seed <= 500; seed++) {
    const r = random(seed);
    const count = 1 + Math.floor(r() * 40);
    const hosts: PlanHost[] = Array.from({ length: count }, (_, i) => ({
      node: `n${Math.floor(r() * count * 2)}-${i % 3 === 0 ? i : 0}`,
      holds: r() < 0.1,
      canServe: r() < 0.85,
    }));
    const originFetchers = 1 + Math.floor(r() * 3);
    const plan = planPeerSources(hosts, { originFetchers });
    const byNode = new Map(hosts.map((h) => [h.node, h]));
    const why = `seed ${seed}: ${JSON.stringify(table(plan))}`;
    assertEquals([...plan.keys()].sort(), [...byNode.keys()].sort(), why);
    const servingHolders = [...byNode.values()].filter((h) => h.holds && h.canServe).length;
    let originFirst = 0;
    for (const [node, s] of plan) {
      const h = byNode.get(node)!;
      if (h.holds) {
        assertEquals(s, { peers: [], origin: false }, why);
        continue;
      }
      // Every host that needs the revision has a source.
      assertOk(s.peers.length > 0 || s.origin, why);
      if (s.peers.length === 0) originFirst++;
      assertOk(!s.peers.includes(node), why);
      assertEquals(new Set(s.peers).size, s.peers.length, why);
      for (const p of s.peers) assertOk(byNode.get(p)?.canServe === true, why);
    }
    // Origin bytes, with no failure: one model's worth per origin fetcher at most.
    const needers = [...byNode.values()].filter((h) => !h.holds);
    const bound = servingHolders > 0
      ? 0
      : needers.some((h) => h.canServe)
      ? originFetchers
      : needers.length; // nobody can serve: every host fetches from the origin
    assertOk(originFirst <= bound, why);
    // No cycles: following first peers from any host ends at a root within |hosts| steps.
    for (const node of plan.keys()) {
      let at = node;
      for (let steps = 0;; steps++) {
        assertOk(steps <= plan.size, `cycle from ${node}: ${why}`);
        const first = plan.get(at)!.peers[0];
        if (first === undefined) break;
        at = first;
      }
      assertOk(plan.get(at)!.origin || byNode.get(at)!.holds, why);
    }
  }
});

Deno.test("peer plan: the chain keeps its order when reports of different ages cross", () => {
  // Reports are seconds old and come at different times: a follower's newer report may show
  // more bytes than its parent's older one. The leader must not move (it would fetch from the
  // origin what the old leader already held, and the old leader would wait on it).
  const at = (
    a: number,
    b: number,
  ) => [{ ...host("a"), bytesDone: a }, { ...host("b"), bytesDone: b }];
  const first = planPeerSources(at(100, 0));
  assertEquals(table(first), { a: "origin", b: "a > origin" });
  let order = peerOrder(at(100, 0));
  assertEquals(order, ["a", "b"]);
  for (const [a, b] of [[100, 110], [140, 110], [150, 200]]) {
    assertEquals(table(planPeerSources(at(a, b), { previousOrder: order })), {
      a: "origin",
      b: "a > origin",
    }, `a at ${a}, b at ${b}`);
    order = peerOrder(at(a, b), order);
  }
  // A newcomer comes after the chain, whatever its bytes or its name.
  const three = [...at(300, 290), { ...host("0"), bytesDone: 500 }];
  assertEquals(peerOrder(three, order), ["a", "b", "0"]);
  // A host that went silent (cannot serve) drops behind the chain, and stays there on its return:
  // leading again, it would fetch from the origin what its stand-in already held.
  const silent = [{ ...host("a", false, false), bytesDone: 300 }, { ...host("b"), bytesDone: 290 }];
  const whileSilent = peerOrder(silent, order);
  assertEquals(whileSilent, ["b", "a"]);
  assertEquals(table(planPeerSources(silent, { previousOrder: order })), {
    b: "origin",
    a: "b > origin",
  });
  assertEquals(
    table(planPeerSources(at(310, 300), { previousOrder: whileSilent })),
    { b: "origin", a: "b > origin" },
  );
  // A host of the old order that now holds the revision leaves the order (it is a root).
  assertEquals(peerOrder([{ ...host("a", true) }, { ...host("b"), bytesDone: 1 }], order), ["b"]);
});

Deno.test("peer plan: a source that dies leaves its follower on the host before it", () => {
  const fleet = [host("n1"), host("n2"), host("n3"), host("n4")];
  const before = planPeerSources(fleet);
  assertEquals(before.get("n3")!.peers[0], "n2");
  const after = planPeerSources(fleet.filter((h) => h.node !== "n2"));
  assertEquals(after.get("n3"), { peers: ["n1"], origin: true });
  // The others keep their sources.
  assertEquals(after.get("n4")!.peers[0], "n3");
  // The origin fetcher died: the next host takes its place, nothing else changes root.
  const rootGone = planPeerSources(fleet.filter((h) => h.node !== "n1"));
  assertEquals(table(rootGone), { n2: "origin", n3: "n2 > origin", n4: "n3 > n2 > origin" });
});
