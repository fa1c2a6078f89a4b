import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import type { ReplicaView } from "../control/views.ts";
import { placementTexts } from "./replica_placement.ts";

const FITS = {
  summary: 'placed with profile "tp1": 1/1 nodes fit',
  profiles: [{ profile: "tp1", fits: true, summary: "1/1 nodes fit", counts: {} }],
};
const NONE_FITS = {
  summary: "no profile fits",
  profiles: [{ profile: "tp1", fits: false, summary: "0/1 nodes fit", counts: {} }],
};
const SHARD = {
  shard_id: "r0-s0",
  rank: 0,
  node: "n1",
  gpu_indices: [0],
  port: 8000,
  state: "ready" as const,
  progress: null,
  last_failure: null,
  restarts: 0,
  crash_loop: null,
  cold_start: null,
  download: null,
};
const FAILURE = {
  reason: "engine refused its arguments",
  shard_id: "r0-s0",
  node: "n1",
  log_tail: [],
  at: 0,
  attempts: 3,
};

type Case = [string, Pick<ReplicaView, "state" | "shards" | "explanation" | "failure">, {
  empty: string | null;
  heading: string;
}];

Deno.test("placementTexts: never 'Not placed' beside an explanation that says it fits", () => {
  const cases: Case[] = [
    ["placed", { state: "ready", shards: [SHARD], explanation: FITS, failure: null }, {
      empty: null,
      heading: "Why here",
    }],
    ["failed after a placement", {
      state: "failed",
      shards: [],
      explanation: FITS,
      failure: FAILURE,
    }, {
      empty: "Not running: it failed on n1 and its GPUs were released; " +
        "it is not placed again until its deployment changes.",
      heading: "Last placement, before it failed",
    }],
    [
      "failed, never placed",
      { state: "failed", shards: [], explanation: NONE_FITS, failure: null },
      {
        empty: "Not running: it failed and its GPUs were released; " +
          "it is not placed again until its deployment changes.",
        heading: "Why not placed",
      },
    ],
    ["rebuilding", { state: "pending", shards: [], explanation: FITS, failure: null }, {
      empty: "Not running: its shards were stopped and it is waiting to be placed again.",
      heading: "Last placement",
    }],
    ["unschedulable", { state: "pending", shards: [], explanation: NONE_FITS, failure: null }, {
      empty: "Not placed: no node fits now (see why below).",
      heading: "Why not placed",
    }],
    ["new", { state: "pending", shards: [], explanation: null, failure: null }, {
      empty: "Not placed yet: waiting for the first placement attempt.",
      heading: "Why not placed",
    }],
  ];
  for (const [name, r, want] of cases) assertEquals(placementTexts(r), want, name);
});

Deno.test("the replica page of a failed replica names its last placement as such", async () => {
  // Imported here so this file stays .ts; the page is JSX.
  const { ReplicaFragment } = await import("./replica_page.tsx");
  const replica: ReplicaView = {
    id: "qwen-r0",
    deployment: "qwen",
    state: "failed",
    profile: null,
    shards: [],
    explanation: FITS,
    failure: FAILURE,
    revision: 1,
    ready_at: null,
    retiring_at: null,
  };
  const html = String(await ReplicaFragment({ replica, nodes: new Map(), events: [] }));
  assertEquals(html.includes("Not placed."), false, html);
  assertEquals(html.includes("Why here"), false, html);
  assertStringIncludes(html, "Last placement, before it failed");
  assertStringIncludes(html, "it failed on n1 and its GPUs were released");
});

Deno.test("the replica page shows each shard's cold start, its download saying where the bytes came from", async () => {
  const { ReplicaFragment } = await import("./replica_page.tsx");
  const cold_start = {
    spawned_at: Date.UTC(2026, 11, 2, 2, 10, 0),
    download: {
      seconds: 4.5,
      bytes: 3 * 2 ** 30,
      sources: [
        { kind: "peer" as const, name: "peer h100-a", bytes: 2 * 2 ** 30 },
        { kind: "hub" as const, name: "https://hub.lan", bytes: 2 ** 30 },
      ],
    },
    phases: [{
      phase: "ready" as const,
      start_ms: 1_000,
      end_ms: 1_500,
      engine_seconds: null,
      warm: false,
      skipped: false,
    }],
  };
  const replica: ReplicaView = {
    id: "qwen-r0",
    deployment: "qwen",
    state: "ready",
    profile: "tp1",
    shards: [{ ...SHARD, cold_start }, { ...SHARD, rank: 1, node: "n2" }],
    explanation: FITS,
    failure: null,
    revision: 1,
    ready_at: 0,
    retiring_at: null,
  };
  const html = String(await ReplicaFragment({ replica, nodes: new Map(), events: [] }));
  const download = html.match(/<tr data-phase="download">(.*?)<\/tr>/s)?.[1] ?? "";
  // The wording is downloadSourcesText's, as describe replica prints it.
  assertStringIncludes(
    download.replace(/<[^>]+>/g, "|"),
    "|4.50||||3.0 GiB fetched: 2.0 GiB from peer h100-a, 1.0 GiB from the hub https://hub.lan|",
  );
  assertStringIncludes(html, "rank 0 on n1, spawned 2026-12-02 02:10:00");
  assertEquals(html.includes("rank 1 on n2"), false, "no receipt, no table");
});
