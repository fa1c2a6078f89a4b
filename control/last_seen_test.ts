import { join } from "node:path";
import { FakeClock } from "../tests/fake_clock.ts";
import { assertEquals } from "../tests/assert.ts";
import { registerNodes, testControl } from "../tests/control_fixture.ts";
import { ControlPlane } from "./control_plane.ts";
import { LAST_SEEN_WRITE_EVERY_MS } from "./last_seen.ts";
import { SqliteStore } from "./store/sqlite_store.ts";
import type { ControlStore } from "./store/store.ts";

const T0 = 1_700_000_000_000;

/** Heartbeats with no shards. */
async function beat(cp: ControlPlane, id: string): Promise<void> {
  await cp.nodes.heartbeat({ node_id: id, generation: 0, shards: [] });
}

async function storedSeen(store: ControlStore, id: string): Promise<number | null | undefined> {
  return (await store.listNodes()).find((n) => n.id === id)?.last_seen_at;
}

Deno.test("last seen: a pass writes a node's time at most once a minute, not on each heartbeat", async () => {
  const { cp, clock, store } = await testControl({ clock: new FakeClock(T0) });
  await registerNodes(cp, ["n1"]);
  assertEquals(await storedSeen(store, "n1"), T0);
  // Heartbeats and passes within the minute write nothing.
  for (let i = 0; i < 11; i++) {
    clock.advance(5_000);
    await beat(cp, "n1");
    await cp.reconcile();
  }
  assertEquals(await storedSeen(store, "n1"), T0);
  clock.advance(5_000);
  await beat(cp, "n1");
  await cp.reconcile();
  assertEquals(await storedSeen(store, "n1"), T0 + LAST_SEEN_WRITE_EVERY_MS);
  // A silent node is not written again.
  clock.advance(10 * LAST_SEEN_WRITE_EVERY_MS);
  await cp.reconcile();
  assertEquals(await storedSeen(store, "n1"), T0 + LAST_SEEN_WRITE_EVERY_MS);
  await cp.stop();
});

Deno.test("last seen: survives a restart of the control plane on the same SQLite file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-last-seen-" });
  const path = join(dir, "llmgw.db");
  const clock = new FakeClock(T0);
  try {
    const store = SqliteStore.open(path);
    const first = await ControlPlane.open({ store, clock, reconcileMs: 3_600_000 });
    try {
      await registerNodes(first, ["n1", "n2"]);
      clock.advance(20_000);
      await beat(first, "n1");
    } finally {
      // A clean stop writes every newer time.
      await first.stop();
      store.close();
    }
    // The control plane comes back an hour later; the nodes have not reported yet.
    clock.advance(3_600_000);
    const reopened = SqliteStore.open(path);
    const second = await ControlPlane.open({ store: reopened, clock, reconcileMs: 3_600_000 });
    try {
      const seen = Object.fromEntries(second.nodes.list().map((n) => [n.id, n.last_seen_ms]));
      assertEquals(seen, { n1: T0 + 20_000, n2: T0 });
      // Liveness still counts from the restart: not declared lost at once.
      await second.reconcile();
      assertEquals(second.nodes.get("n1").state, "ready");
      // Heard from again: now.
      await beat(second, "n1");
      assertEquals(second.nodes.get("n1").last_seen_ms, clock.now());
    } finally {
      await second.stop();
      reopened.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
