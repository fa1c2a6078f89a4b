/**
 * The replica book, transition by transition, on a fake clock: what each
 * one marks for a new desired state (touch), frees (inventory and the
 * pass's index), stores and tells, each exactly once.
 */
import { assertEquals, assertOk } from "../tests/assert.ts";
import { QWEN, registerNodes, reportAll, testControl } from "../tests/control_fixture.ts";
import { place, type Placed, type Unschedulable } from "../placement/mod.ts";
import type { ControlPlane } from "./control_plane.ts";
import type { ReplicaBook } from "./replicas.ts";
import type { StoredReplica } from "./store/store.ts";
import type { FakeClock } from "../tests/fake_clock.ts";

/** What one transition did. */
interface Effects {
  /** Nodes marked for a new desired state. */
  touched: string[];
  /** GPUs held on n1 after it. */
  held: number;
  /** Free rtx4090-24g GPUs on n1 in the pass's index after it. */
  indexFree: number;
  /** The stored record's phase, or "deleted". */
  stored: string;
}

/** A control plane with node n1 (8 × rtx4090) and deployment qwen (2 GPUs a replica), no pass run. */
async function setup(): Promise<
  { cp: ControlPlane; book: ReplicaBook; r: StoredReplica; clock: FakeClock }
> {
  const { cp, clock } = await testControl({ retireGraceMs: 5_000 });
  await registerNodes(cp, ["n1"]);
  await cp.deployments.apply(QWEN);
  const r = await cp.book.addPending("qwen", 0, 1, false);
  return { cp, book: cp.book, r, clock };
}

/** Places `r` on the book's index, as the reconciler does. */
function placement(cp: ControlPlane, r: StoredReplica): Placed {
  const result = place(cp.book.index(), cp.state.specOf(r)!, cp.book.nextPlacementId(r));
  assertOk(result.status === "placed", result.explanation.summary);
  return result;
}

/** Runs `act` and says what it did to the nodes, the inventory, the index and the store. */
async function effects(cp: ControlPlane, act: () => Promise<unknown>): Promise<Effects> {
  cp.state.dirty.clear();
  await act();
  const stored = (await cp.state.store.listReplicas()).find((x) => x.id === "qwen-r0");
  const slot = cp.book.index().byId.get("n1")!.classes.get("rtx4090-24g")!;
  return {
    touched: [...cp.state.dirty],
    held: (cp.inventory.getNode("n1")?.allocations ?? []).flatMap((a) => a.gpu_indices).length,
    indexFree: slot.free.length,
    stored: stored?.phase ?? "deleted",
  };
}

/** Events added by `act`, newest last. */
async function told(cp: ControlPlane, act: () => Promise<unknown>): Promise<string[]> {
  const seen = new Set((await cp.events.list({ limit: 1000 })).map((e) => e.id));
  await act();
  return (await cp.events.list({ limit: 1000 })).filter((e) => !seen.has(e.id))
    .map((e) => `${e.kind} ${e.subject}`).sort();
}

Deno.test("each transition touches, frees, stores and tells exactly once", async () => {
  const cases: {
    name: string;
    /** Brings the replica to the state the transition starts from. */
    given: (cp: ControlPlane, r: StoredReplica) => Promise<void>;
    act: (book: ReplicaBook, r: StoredReplica, cp: ControlPlane) => Promise<unknown>;
    want: Effects;
    events: string[];
  }[] = [
    {
      name: "place",
      given: async () => {},
      act: (book, r, cp) => book.place(r, placement(cp, r)),
      want: { touched: ["n1"], held: 2, indexFree: 6, stored: "placed" },
      events: ["replica_placed replica/qwen-r0"],
    },
    {
      name: "rebuild",
      given: (cp, r) => cp.book.place(r, placement(cp, r)),
      act: (book, r) => book.rebuild(r, "node n1 is lost"),
      want: { touched: ["n1"], held: 0, indexFree: 8, stored: "pending" },
      events: ["replica_rebuilding replica/qwen-r0"],
    },
    {
      name: "requeue (runs nothing: no event)",
      given: async () => {},
      act: (book, r) => book.requeue(r, { revision: 2 }),
      want: { touched: [], held: 0, indexFree: 8, stored: "pending" },
      events: [],
    },
    {
      name: "fail",
      given: (cp, r) => cp.book.place(r, placement(cp, r)),
      act: (book, r) =>
        book.fail(r, {
          reason: "refused",
          shard_id: "qwen-r0.1/0",
          node: "n1",
          log_tail: [],
          at: 1,
          attempts: 3,
        }, "gave up"),
      want: { touched: ["n1"], held: 0, indexFree: 8, stored: "failed" },
      events: ["replica_failed replica/qwen-r0"],
    },
    {
      name: "remove",
      given: (cp, r) => cp.book.place(r, placement(cp, r)),
      act: (book, r) => book.remove(r, "scaled down"),
      want: { touched: ["n1"], held: 0, indexFree: 8, stored: "deleted" },
      events: ["replica_removed replica/qwen-r0"],
    },
    {
      name: "mark ready",
      given: async (cp, r) => {
        await cp.book.place(r, placement(cp, r));
        await cp.desired.publishDirty();
        await reportAll(cp, "n1", "ready");
      },
      act: (book, r) => book.markReady(r),
      want: { touched: [], held: 2, indexFree: 6, stored: "placed" },
      events: ["replica_ready replica/qwen-r0"],
    },
  ];
  for (const c of cases) {
    const { cp, book, r } = await setup();
    book.beginPass();
    await c.given(cp, r);
    let got: Effects | null = null;
    const events = await told(cp, async () => {
      got = await effects(cp, () => c.act(book, r, cp));
    });
    book.endPass();
    assertEquals(got, c.want, c.name);
    assertEquals(events, c.events, c.name);
    // The pass's index is the live inventory with the pass's changes: a fresh one agrees.
    const fresh = book.index().byId.get("n1")!.classes.get("rtx4090-24g")!.free.length;
    assertEquals(fresh, c.want.indexFree, `${c.name}: fresh index`);
  }
});

Deno.test("unschedulable is told when the reasons change, not when only their words do", async () => {
  const { cp, book, r } = await setup();
  const spec = cp.state.specOf(r)!;
  const p = spec.profiles[0];
  const big = { ...spec, profiles: [{ ...p, tensor_parallel: 16, gpus_per_node: 16 }] };
  const result = place(book.index(), big, book.nextPlacementId(r), {
    detail: "grouped",
  }) as Unschedulable;
  assertEquals(result.status, "unschedulable");
  const reworded: Unschedulable = {
    ...result,
    explanation: { ...result.explanation, summary: `${result.explanation.summary} (reworded)` },
  };
  const fewer = structuredClone(result);
  const counts = fewer.explanation.profiles[0].counts as Record<string, number>;
  const code = Object.keys(counts)[0];
  counts[code] += 1;
  assertEquals(await told(cp, () => book.unschedulable(r, result)), [
    "replica_unschedulable replica/qwen-r0",
  ]);
  assertEquals(await told(cp, () => book.unschedulable(r, result)), []);
  assertEquals(await told(cp, () => book.unschedulable(r, reworded)), []);
  assertEquals(await told(cp, () => book.unschedulable(r, fewer)), [
    "replica_unschedulable replica/qwen-r0",
  ]);
  assertEquals(book.counters.unschedulable, 2);
});

Deno.test("retire: a ready replica leaves the endpoints first, and may stop after the grace", async () => {
  const { cp, book, r, clock } = await setup();
  await book.place(r, placement(cp, r));
  await cp.desired.publishDirty();
  await reportAll(cp, "n1", "ready");
  assertEquals(await book.retire(r), false);
  const stored = (await cp.state.store.listReplicas())[0];
  assertEquals(stored.placement?.retiring_at, cp.state.now());
  assertEquals(cp.readyEndpoints(), []);
  clock.advance(4_999);
  assertEquals(await book.retire(r), false);
  clock.advance(1);
  assertEquals(await book.retire(r), true);
  // One that serves nothing may go at once.
  const { cp: cp2, book: book2, r: r2 } = await setup();
  await book2.place(r2, placement(cp2, r2));
  assertEquals(await book2.retire(r2), true);
});

Deno.test("a placement's number grows with each placement, so shard ids never repeat", async () => {
  const { cp, book, r } = await setup();
  assertEquals(book.nextPlacementId(r), "qwen-r0.1");
  await book.place(r, placement(cp, r));
  assertEquals(r.placement?.shards.map((s) => s.shard_id), ["qwen-r0.1/0"]);
  await book.rebuild(r, "again");
  assertEquals(book.nextPlacementId(r), "qwen-r0.2");
  await book.remove(r, "gone");
  assertEquals(book.nextPlacementId(r), "qwen-r0.1");
});
