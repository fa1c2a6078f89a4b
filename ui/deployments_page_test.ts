import { assertEquals } from "../tests/assert.ts";
import type { ReplicaView, ShardView } from "../control/views.ts";
import { replicaNote } from "./deployments_page.tsx";

const SHARD: ShardView = {
  shard_id: "acme-r0.1/0",
  rank: 0,
  node: "n1",
  gpu_indices: [0],
  port: 0,
  state: "downloading",
  progress: null,
  last_failure: null,
  restarts: 0,
  crash_loop: null,
  cold_start: null,
  download: {
    model: "acme/llama",
    commit: null,
    bytes_done: 42,
    bytes_total: 100,
    rate_bytes_per_second: 1.2 * 2 ** 30,
    eta_seconds: 31,
    sources: ["hub"],
    last_error: null,
    failures: 0,
  },
};

Deno.test("the deployments page says where a downloading replica is and how far", () => {
  const r: ReplicaView = {
    id: "acme-r0",
    deployment: "acme",
    state: "downloading",
    profile: "p",
    shards: [SHARD],
    explanation: null,
    failure: null,
    revision: 1,
    ready_at: null,
    retiring_at: null,
  };
  assertEquals(replicaNote(r), "downloading on n1: 42% 1.2 GiB/s ETA 31s");
});
