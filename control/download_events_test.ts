/**
 * A heartbeat's download events (table): started, source changed,
 * completed, a failed try; never one per percent; nothing a predecessor told.
 */
import { assertEquals } from "../tests/assert.ts";
import { shardReport } from "../tests/control_fixture.ts";
import type { ShardReport } from "../protocol/agent_protocol.ts";
import type { ShardDownload } from "../protocol/shard_download.ts";
import { downloadEvents } from "./download_events.ts";
import { shardEvents } from "./shard_events.ts";

const STARTED = 1_000_000;
const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const d = (over: Partial<ShardDownload> = {}): ShardDownload => ({
  model: "acme/llama",
  commit: COMMIT,
  bytes_done: 1024,
  bytes_total: 3 * 2 ** 30,
  rate_bytes_per_second: 2 ** 20,
  eta_seconds: 60,
  sources: ["hub http://hub.lan"],
  last_error: null,
  failures: 0,
  ...over,
});
const dl = (over: Partial<ShardDownload> = {}, since = STARTED + 1) =>
  shardReport("s", "downloading", { since, pid: null, download: d(over) });
const before = (...reports: ShardReport[]) => new Map(reports.map((r) => [r.id, r]));

const CASES: [string, Map<string, ShardReport> | undefined, ShardReport, string[]][] = [
  ["a download starts", before(shardReport("s", "pending")), dl(), [
    `download_started shard s on n1: downloading acme/llama@${COMMIT}`,
  ]],
  ["a new shard's first report downloading", before(), dl(), [
    `download_started shard s on n1: downloading acme/llama@${COMMIT}`,
  ]],
  ["a predecessor told a download under way", undefined, dl({}, STARTED - 5), []],
  ["more bytes: no event", before(dl()), dl({ bytes_done: 2 ** 30 }), []],
  ["between chunks (no source for a moment): no event", before(dl()), dl({ sources: [] }), []],
  ["another source", before(dl()), dl({ sources: ["peer n2"] }), [
    `download_source_changed shard s on n1: download of acme/llama@${COMMIT} now from peer n2 (was hub http://hub.lan)`,
  ]],
  [
    "a failed try",
    before(dl()),
    dl({ failures: 1, last_error: "hub http://hub.lan unreachable: connection refused" }),
    [
      `download_failed shard s on n1: download of acme/llama@${COMMIT} failed (try 1): hub http://hub.lan unreachable: connection refused; the agent tries again after a backoff`,
    ],
  ],
  [
    "the same failed try again: no event",
    before(dl({ failures: 1, last_error: "x" })),
    dl({ failures: 1, last_error: "x" }),
    [],
  ],
  ["done: the engine starts", before(dl()), shardReport("s", "starting"), [
    `download_completed shard s on n1: acme/llama@${COMMIT} downloaded (3.0 GiB); the engine starts`,
  ]],
  [
    "failed for good: told by the reconciler, not here",
    before(dl()),
    shardReport("s", "failed"),
    [],
  ],
];

for (const [name, was, now, want] of CASES) {
  Deno.test(`download events: ${name}`, () => {
    const got = downloadEvents("n1", was, [now], STARTED).map((e) => `${e.kind} ${e.message}`);
    assertEquals(got, want);
  });
}

Deno.test("download events come with a heartbeat's other shard events", () => {
  const events = shardEvents("n1", before(shardReport("s", "pending")), [dl()], STARTED);
  assertEquals(events.map((e) => e.kind), ["download_started"]);
});
