import type { DownloadSource } from "../protocol/cold_start_receipt.ts";
import { assertEquals } from "../tests/assert.ts";
import type { ShardListing } from "../protocol/admin_protocol.ts";
import type { PhaseReceipt } from "../protocol/cold_start_receipt.ts";
import { coldStartLines } from "./cold_start_view.ts";

const p = (
  phase: PhaseReceipt["phase"],
  start_ms: number | null,
  end_ms: number | null,
  engine_seconds: number | null = null,
  flags: Partial<PhaseReceipt> = {},
): PhaseReceipt => ({
  phase,
  start_ms,
  end_ms,
  engine_seconds,
  warm: false,
  skipped: false,
  ...flags,
});

function shard(over: Partial<ShardListing>): ShardListing {
  return {
    shard_id: "llama-8b-r0.1/0",
    rank: 0,
    node: "n1",
    gpu_indices: [0],
    port: 20000,
    state: "ready",
    progress: null,
    last_failure: null,
    restarts: 0,
    crash_loop: null,
    cold_start: null,
    download: null,
    ...over,
  };
}

Deno.test("describe replica: a receipt as a table, warm and skipped phases said so", () => {
  const lines = coldStartLines([
    shard({
      cold_start: {
        spawned_at: Date.UTC(2026, 11, 2, 2, 10, 0),
        download: { seconds: 12.5, bytes: 16 * 2 ** 30 },
        phases: [
          p("weights", 1_000, 22_000, 20.44),
          p("compile", 22_000, 22_400, 0.31, { warm: true }),
          p("kv_cache", 22_400, 23_000),
          p("graph_capture", null, null, null, { skipped: true }),
          p("ready", 23_000, 23_500),
        ],
      },
    }),
    shard({ rank: 1, node: "n2" }),
  ]);
  assertEquals(lines, [
    "Cold start:",
    "  rank 0 on n1, spawned 2026-12-02T02:10:00.000Z:",
    "    PHASE          SECONDS  ENGINE SAYS  NOTE",
    "    download       12.50                 16.0 GiB fetched",
    "    weights        21.00    20.44",
    "    compile        0.40     0.31         warm: from the compile cache",
    "    kv_cache       0.60",
    "    graph_capture  -                     skipped",
    "    ready          0.50",
    "    total          23.50                 spawn to first ready probe",
  ]);
});

Deno.test("describe replica: a start under way, and no block without receipts", () => {
  const lines = coldStartLines([
    shard({
      state: "loading",
      cold_start: {
        spawned_at: 0,
        download: null,
        phases: [p("weights", 1_000, null), p("ready", null, null)],
      },
    }),
  ]);
  assertEquals(lines.slice(2), [
    "    PHASE    SECONDS  ENGINE SAYS  NOTE",
    "    weights  -                     under way",
    "    ready    -                     not seen yet",
  ]);
  assertEquals(coldStartLines([shard({})]), []);
});

Deno.test("describe replica: the download says which sources supplied its bytes", () => {
  const receipt = (sources: DownloadSource[]) =>
    coldStartLines([
      shard({
        cold_start: {
          spawned_at: 0,
          download: { seconds: 2, bytes: 2 ** 26, sources },
          phases: [],
        },
      }),
    ])[3];
  assertEquals(
    receipt([{ kind: "peer", name: "peer h100-a", bytes: 2 ** 26 }]),
    "    download  2.00                  64.0 MiB fetched from peer h100-a",
  );
  assertEquals(
    receipt([
      { kind: "peer", name: "peer h100-a", bytes: 48 * 2 ** 20 },
      { kind: "hub", name: "https://hub.lan", bytes: 16 * 2 ** 20 },
    ]),
    "    download  2.00                  64.0 MiB fetched: 48.0 MiB from peer h100-a, 16.0 MiB from the hub https://hub.lan",
  );
});
