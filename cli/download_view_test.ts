import { assertEquals } from "../tests/assert.ts";
import type { ShardListing } from "../protocol/admin_protocol.ts";
import type { ShardDownload } from "../protocol/shard_download.ts";
import { downloadLines } from "./download_view.ts";
import { downloadSummary as downloadCell } from "../protocol/shard_download.ts";
import { replicaTable } from "./admin_views.ts";

const GIB = 2 ** 30;
const COMMIT = "0123456789abcdef0123456789abcdef01234567";

function download(over: Partial<ShardDownload> = {}): ShardDownload {
  return {
    model: "acme/llama",
    commit: COMMIT,
    bytes_done: Math.round(0.42 * 10 * GIB),
    bytes_total: 10 * GIB,
    rate_bytes_per_second: 1.2 * GIB,
    eta_seconds: 31,
    sources: ["hub http://hub.lan"],
    last_error: null,
    failures: 0,
    ...over,
  };
}

function shard(d: ShardDownload | null, rank = 0): ShardListing {
  return {
    shard_id: `acme-r0.1/${rank}`,
    rank,
    node: `n${rank + 1}`,
    gpu_indices: [0],
    port: 0,
    state: d === null ? "starting" : "downloading",
    progress: null,
    last_failure: null,
    restarts: 0,
    crash_loop: null,
    cold_start: null,
    download: d,
  };
}

Deno.test("download cell: percent, rate and ETA; retrying between tries; resolving before a total", () => {
  assertEquals(downloadCell(download()), "42% 1.2 GiB/s ETA 31s");
  assertEquals(
    downloadCell(
      download({ last_error: "hub unreachable", failures: 2, rate_bytes_per_second: 0 }),
    ),
    "42% retrying (2 failed)",
  );
  assertEquals(
    downloadCell(download({ bytes_total: 0, bytes_done: 0, rate_bytes_per_second: 0 })),
    "resolving",
  );
});

Deno.test("get replicas shows a downloading shard's state and progress", () => {
  const table = replicaTable([{
    id: "acme-r0",
    deployment: "acme",
    state: "downloading",
    profile: "p",
    shards: [shard(download())],
    explanation: null,
    failure: null,
    revision: 1,
    ready_at: null,
    retiring_at: null,
  }]);
  const row = table.split("\n")[1];
  assertEquals(row.split(/\s{2,}/).slice(0, 2), ["acme-r0", "downloading"]);
  assertEquals(row.trimEnd().endsWith("42% 1.2 GiB/s ETA 31s"), true, row);
});

Deno.test("describe's Download block: bytes, rate, ETA and source per host, the last error", () => {
  assertEquals(downloadLines([shard(null)]), []);
  assertEquals(
    downloadLines([
      shard(download()),
      shard(
        download({
          last_error: "hub http://hub.lan unreachable: connection refused",
          failures: 1,
          sources: [],
          rate_bytes_per_second: 0,
          eta_seconds: null,
        }),
        1,
      ),
    ]),
    [
      "Download:",
      `  rank 0 on n1: acme/llama@${COMMIT}`,
      "    4.2 GiB of 10.0 GiB (42%), 1.2 GiB/s, ETA 31s, from hub http://hub.lan",
      `  rank 1 on n2: acme/llama@${COMMIT}`,
      "    4.2 GiB of 10.0 GiB (42%), 0 B/s, ETA -, from -",
      "    try 1 failed: hub http://hub.lan unreachable: connection refused; trying again after a backoff",
    ],
  );
});
