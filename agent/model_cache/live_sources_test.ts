/**
 * A download under way follows the assignment (issue #25 item 3): a source
 * put first while it runs gets the next chunks, a source taken out of the
 * plan gets none, the chunk in flight finishes where it is, nothing is
 * fetched twice, and each change is one `source_changed` event of cause
 * `assignment`; a failure is still told as one of cause `failure`.
 */
import { assertEquals } from "../../tests/assert.ts";
import { MemoryByteSource } from "../../tests/memory_byte_source.ts";
import { sampleModel, testCache, withTempDir } from "../../tests/model_cache_fixture.ts";
import type { ByteSource } from "../../models/byte_source.ts";
import type { CacheEvent } from "./cache_events.ts";
import { LiveSources } from "./live_sources.ts";

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

Deno.test("LiveSources: re-plans and failures are told apart; a source re-assigned is trusted again", () => {
  const hub = new MemoryByteSource(HUB, new Map(), [], "hub");
  const a = new MemoryByteSource("peer a", new Map());
  const b = new MemoryByteSource("peer b", new Map());
  let assigned: ByteSource[] = [hub];
  const live = new LiveSources(() => assigned);
  const none = new Set<string>();
  const look = () => {
    const { source, reassigned } = live.look(none);
    return [source?.name, reassigned];
  };
  assertEquals(look(), [HUB, null]);
  assigned = [a, hub];
  assertEquals(look(), ["peer a", { from: HUB, to: "peer a" }]);
  assertEquals(look(), ["peer a", null]);
  // A failure moves the head once, told by failed(), not again as a re-plan.
  assertEquals(live.failed(a), { from: "peer a", to: HUB });
  assertEquals(live.failed(a), null);
  assertEquals(look(), [HUB, null]);
  // The failed peer leaves the plan and comes back: the control plane's new word.
  assigned = [hub];
  assertEquals(look(), [HUB, null]);
  assigned = [a, hub];
  assertEquals(look(), ["peer a", { from: HUB, to: "peer a" }]);
  // A source that is not first failing changes nothing.
  assertEquals(live.failed(hub), null);
  assertEquals(look(), ["peer a", null]);
  // A refusal for this file skips it without a change of order.
  assertEquals(live.look(new Set(["peer a"])).source?.name, HUB);
  assigned = [b, a, hub];
  assertEquals(look(), ["peer b", { from: "peer a", to: "peer b" }]);
  // A mismatch puts the sources that served it last, silently.
  live.blame(new Set(["peer b"]));
  assertEquals(look(), ["peer a", null]);
  assertEquals(live.order().map((s) => s.name), ["peer a", HUB, "peer b"]);
});
