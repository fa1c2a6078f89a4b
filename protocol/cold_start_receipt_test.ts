import { assertEquals, assertOk } from "../tests/assert.ts";
import { ShardReportSchema } from "./agent_protocol.ts";
import { type ColdStartReceipt, downloadSourcesText } from "./cold_start_receipt.ts";
import { shardReport } from "../tests/shard_report.ts";

/** A report as an agent before receipts sent it: no `cold_start`. */
const OLDER = shardReport("r0.1/0", "ready");

const RECEIPT: ColdStartReceipt = {
  spawned_at: 1_700_000_000_000,
  download: null,
  phases: [
    {
      phase: "weights",
      start_ms: 1_000,
      end_ms: 22_000,
      engine_seconds: 20.44,
      warm: false,
      skipped: false,
    },
    {
      phase: "compile",
      start_ms: 25_000,
      end_ms: 27_000,
      engine_seconds: 4.99,
      warm: true,
      skipped: false,
    },
    {
      phase: "ready",
      start_ms: 27_000,
      end_ms: 30_000,
      engine_seconds: null,
      warm: false,
      skipped: false,
    },
  ],
};

Deno.test("an older agent's report without a receipt still parses", () => {
  const r = ShardReportSchema.parse(OLDER);
  assertEquals(r.cold_start, undefined);
  assertEquals(ShardReportSchema.parse({ ...OLDER, cold_start: null }).cold_start, null);
});

Deno.test("a report's receipt parses to itself", () => {
  assertEquals(ShardReportSchema.parse({ ...OLDER, cold_start: RECEIPT }).cold_start, RECEIPT);
});

Deno.test("a receipt with a phase outside the closed list, too many phases or a negative time is refused", () => {
  const bad: unknown[] = [
    { ...RECEIPT, phases: [{ ...RECEIPT.phases[0], phase: "warmup" }] },
    { ...RECEIPT, phases: Array(7).fill(RECEIPT.phases[0]) },
    { ...RECEIPT, phases: [{ ...RECEIPT.phases[0], start_ms: -1 }] },
    { ...RECEIPT, download: { seconds: -1, bytes: 0 } },
    {
      ...RECEIPT,
      download: { seconds: 1, bytes: 1, sources: [{ kind: "ftp", name: "x", bytes: 1 }] },
    },
    {
      ...RECEIPT,
      download: {
        seconds: 1,
        bytes: 1,
        sources: [{ kind: "hub", name: "x".repeat(257), bytes: 1 }],
      },
    },
    {
      ...RECEIPT,
      download: {
        seconds: 1,
        bytes: 17,
        sources: Array.from(
          { length: 17 },
          (_, i) => ({ kind: "peer", name: `peer n${i}`, bytes: 1 }),
        ),
      },
    },
  ];
  for (const cold_start of bad) {
    assertOk(
      !ShardReportSchema.safeParse({ ...OLDER, cold_start }).success,
      JSON.stringify(cold_start),
    );
  }
});

Deno.test("a receipt's download sources parse, and say in words where the bytes came from", () => {
  const download = {
    seconds: 1,
    bytes: 3 * 2 ** 20,
    sources: [
      { kind: "peer" as const, name: "peer n2", bytes: 2 * 2 ** 20 },
      { kind: "hub" as const, name: "https://hub.lan", bytes: 2 ** 20 },
    ],
  };
  assertEquals(
    ShardReportSchema.parse({ ...OLDER, cold_start: { ...RECEIPT, download } }).cold_start
      ?.download,
    download,
  );
  assertEquals(
    downloadSourcesText(download),
    ": 2.0 MiB from peer n2, 1.0 MiB from the hub https://hub.lan",
  );
  assertEquals(
    downloadSourcesText({ sources: [download.sources[1]] }),
    " from the hub https://hub.lan",
  );
  assertEquals(
    downloadSourcesText({ sources: [{ kind: "path", name: "/mnt/models", bytes: 5 }] }),
    " from /mnt/models",
  );
  // An older agent's receipt, or a source that sent nothing: no words.
  assertEquals(downloadSourcesText({}), "");
  assertEquals(downloadSourcesText({ sources: [{ ...download.sources[0], bytes: 0 }] }), "");
});
