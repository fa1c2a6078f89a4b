/**
 * A download under way follows the assignment (issue #25 item 3): a source
 * put first while it runs gets the next chunks, a source taken out of the
 * plan gets none, the chunk in flight finishes where it is, nothing is
 * fetched twice, and each change is one `source_changed` event of cause
 * `assignment`; a failure is still told as one of cause `failure`; a
 * source that failed is asked again once its backoff ends (`recovered`).
 */
import { assertEquals } from "../../tests/assert.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { MemoryByteSource } from "../../tests/memory_byte_source.ts";
import { sampleModel, testCache, withTempDir } from "../../tests/model_cache_fixture.ts";
import type { ByteSource } from "../../models/byte_source.ts";
import type { CacheEvent } from "./cache_events.ts";
import { LiveSources } from "./live_sources.ts";
import { NO_JITTER, SOURCE_BACKOFF } from "./source_order.ts";

const HUB = "https://hub.example";

function changes(events: CacheEvent[]): [string, string, string][] {
  return events.flatMap((e) => e.kind === "source_changed" ? [[e.cause, e.from, e.to]] : []);
}

/** Chunks of sampleModel at the test cache's 1 KiB: 1 + 5 + 4. */
const CHUNKS = 10;

Deno.test("a peer assigned while the hub serves: the remaining chunks come from the peer", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const hub = new MemoryByteSource(HUB, contents, [], "hub");
    const peer = new MemoryByteSource("peer a", contents);
    let assigned: ByteSource[] = [hub];
    // The plan reaches the agent while the hub serves its third chunk.
    hub.onRead = () => {
      if (hub.reads.length === 3) assigned = [peer, hub];
    };
    const { cache, events } = testCache(root, { concurrency: 1 });
    const dir = await cache.ensureSnapshot(snapshot, () => assigned);
    for (const f of snapshot.files) {
      assertEquals(await Deno.readFile(`${dir}/${f.path}`), contents.get(f.path), f.path);
    }
    // The chunk in flight finished on the hub; no chunk was asked twice.
    assertEquals([hub.reads.length, peer.reads.length], [3, CHUNKS - 3]);
    assertEquals(changes(events), [["assignment", HUB, "peer a"]]);
  });
});

Deno.test("a peer taken out of the plan is asked for no new chunk; the origin takes over", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const hub = new MemoryByteSource(HUB, contents, [], "hub");
    const peer = new MemoryByteSource("peer a", contents);
    let assigned: ByteSource[] = [peer, hub];
    peer.onRead = () => {
      if (peer.reads.length === 2) assigned = [hub];
    };
    const { cache, events } = testCache(root, { concurrency: 2 });
    await cache.ensureSnapshot(snapshot, () => assigned);
    // At most the two chunks in flight when the plan changed were read from the peer.
    assertEquals([peer.reads.length, hub.reads.length], [2, CHUNKS - 2]);
    assertEquals(changes(events), [["assignment", "peer a", HUB]]);
  });
});

Deno.test("a peer that failed once is asked again after its backoff and serves the rest", async () => {
  await withTempDir(async (root) => {
    const { snapshot, contents } = sampleModel();
    const hub = new MemoryByteSource(HUB, contents, [], "hub");
    // Restarting: its first read is refused.
    const peer = new MemoryByteSource("peer a", contents, [{ kind: "refuse", times: 1 }]);
    const clock = new FakeClock(0);
    // 2 s pass while the hub serves its second chunk.
    hub.onRead = () => {
      if (hub.reads.length === 2) clock.advance(2_000);
    };
    const { cache, events } = testCache(root, { concurrency: 1, clock });
    const dir = await cache.ensureSnapshot(snapshot, () => [peer, hub]);
    for (const f of snapshot.files) {
      assertEquals(await Deno.readFile(`${dir}/${f.path}`), contents.get(f.path), f.path);
    }
    // The refused read, then every chunk after the hub's two (before this change: the hub's).
    assertEquals([hub.reads.length, peer.reads.length], [2, 1 + CHUNKS - 2]);
    assertEquals(changes(events), [["failure", "peer a", HUB], ["recovered", HUB, "peer a"]]);
  });
});

Deno.test("LiveSources: re-plans, failures and recoveries are told apart; a source re-assigned is trusted again", () => {
  const hub = new MemoryByteSource(HUB, new Map(), [], "hub");
  const a = new MemoryByteSource("peer a", new Map());
  const b = new MemoryByteSource("peer b", new Map());
  let assigned: ByteSource[] = [hub];
  const clock = new FakeClock(0);
  const live = new LiveSources(() => assigned, clock, SOURCE_BACKOFF, NO_JITTER);
  const none = new Set<string>();
  const look = (demoted?: Set<string>) => {
    const { source, reassigned } = live.look(none, demoted);
    return [source?.name, reassigned];
  };
  assertEquals(look(), [HUB, null]);
  assigned = [a, hub];
  assertEquals(look(), ["peer a", { from: HUB, to: "peer a", cause: "assignment" }]);
  assertEquals(look(), ["peer a", null]);
  // A failure moves the head once, told by failed(), not again as a re-plan; a second
  // chunk cut by the same outage (begun before it was counted) adds nothing.
  assertEquals(live.failed(a, 0), { from: "peer a", to: HUB });
  assertEquals(live.failed(a, 0), null);
  assertEquals(look(), [HUB, null]);
  // 2 s on, it is asked first again (a probe): told as a recovery. While the probe runs,
  // the other chunks go to the hub, with no change told.
  clock.advance(2_000);
  assertEquals(look(), ["peer a", { from: HUB, to: "peer a", cause: "recovered" }]);
  assertEquals(look(), [HUB, null]);
  // The probe failed: 4 s this time.
  assertEquals(live.failed(a, 2_000), { from: "peer a", to: HUB });
  clock.advance(3_999);
  assertEquals(look(), [HUB, null]);
  clock.advance(1);
  assertEquals(look(), ["peer a", { from: HUB, to: "peer a", cause: "recovered" }]);
  // It served: healthy, every chunk asks it.
  live.succeeded(a, clock.now());
  assertEquals(look(), ["peer a", null]);
  assertEquals(look(), ["peer a", null]);
  // The failed peer leaves the plan and comes back: the control plane's new word.
  assertEquals(live.failed(a, clock.now()), { from: "peer a", to: HUB });
  assigned = [hub];
  assertEquals(look(), [HUB, null]);
  assigned = [a, hub];
  assertEquals(look(), ["peer a", { from: HUB, to: "peer a", cause: "assignment" }]);
  // A source that is not first failing changes nothing first.
  assertEquals(live.failed(hub, clock.now()), null);
  assertEquals(look(), ["peer a", null]);
  // A refusal for this file skips it without a change of order.
  assertEquals(live.look(new Set(["peer a"])).source?.name, HUB);
  assigned = [b, a, hub];
  assertEquals(look(), ["peer b", { from: "peer a", to: "peer b", cause: "assignment" }]);
  // A mismatch backs off the sources that served it, silently (after the hub's, which failed
  // just before); that file asks them last.
  clock.advance(1);
  live.blame(new Set(["peer b"]));
  assertEquals(look(), ["peer a", null]);
  assertEquals(live.order().map((s) => s.name), ["peer a", HUB, "peer b"]);
  clock.advance(60_000);
  live.succeeded(b, clock.now());
  assertEquals(look(new Set(["peer b"])), ["peer a", {
    from: "peer a",
    to: "peer b",
    cause: "recovered",
  }]);
});
