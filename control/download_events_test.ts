/**
 * A heartbeat's download events (table): started, source changed,
 * completed, a failed try; never one per percent; nothing a predecessor told.
 */
import { assertEquals } from "../tests/assert.ts";
import { shardReport } from "../tests/control_fixture.ts";
import type { ShardReport } from "../protocol/agent_protocol.ts";
import type { ShardDownload } from "../protocol/shard_download.ts";
import type { DownloadSource } from "../protocol/cold_start_receipt.ts";
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
/** A shard just started, its receipt's download from `sources`. */
const started = (spawnedAt: number, sources: DownloadSource[]) =>
  shardReport("s", "starting", {
    cold_start: {
      spawned_at: spawnedAt,
      download: { seconds: 3, bytes: sources.reduce((n, s) => n + s.bytes, 0), sources },
      phases: [],
    },
  });
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
    "done: the completion says which sources supplied the bytes",
    before(dl()),
    started(STARTED + 9, [
      { kind: "peer", name: "peer n2", bytes: 3 * 2 ** 30 - 2 ** 20 },
      { kind: "hub", name: "http://hub.lan", bytes: 2 ** 20 },
    ]),
    [
      `download_completed shard s on n1: acme/llama@${COMMIT} downloaded (3.0 GiB: 3.0 GiB from peer n2, 1.0 MiB from the hub http://hub.lan); the engine starts`,
    ],
  ],
  [
    "a download done between two heartbeats: told once, from its receipt",
    before(shardReport("s", "pending")),
    started(STARTED + 9, [{ kind: "hub", name: "http://hub.lan", bytes: 2 ** 26 }]),
    [
      "download_completed shard s on n1: its model downloaded (64.0 MiB from the hub http://hub.lan); the engine starts",
    ],
  ],
  [
    "the same receipt on the next heartbeat: no event",
    before(started(STARTED + 9, [{ kind: "hub", name: "http://hub.lan", bytes: 1 }])),
    shardReport("s", "ready", {
      cold_start: started(STARTED + 9, [{ kind: "hub", name: "http://hub.lan", bytes: 1 }])
        .cold_start,
    }),
    [],
  ],
  [
    "the receipt comes a heartbeat after starting: the completion was told then",
    before(shardReport("s", "starting")),
    started(STARTED + 9, [{ kind: "hub", name: "http://hub.lan", bytes: 1 }]),
    [],
  ],
  [
    "a restart's receipt (nothing fetched): no event",
    before(shardReport("s", "failed")),
    shardReport("s", "starting", {
      cold_start: { spawned_at: STARTED + 9, download: { seconds: 0, bytes: 0 }, phases: [] },
    }),
    [],
  ],
  [
    "a predecessor's control plane saw that start",
    undefined,
    started(STARTED - 9, [{ kind: "hub", name: "http://hub.lan", bytes: 1 }]),
    [],
  ],
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
