/**
 * The heartbeat's `model_cache` and the desired state's `models` (issue #25
 * item 5): optional (older agents and control planes parse), checked field
 * by field, bounded.
 */
import { assertEquals, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import { HeartbeatRequestSchema, parseDesiredState } from "./agent_protocol.ts";
import { type ModelCacheReport, ModelCacheReportSchema } from "./model_cache_report.ts";
import { REPORT_BOUNDS } from "./report_bounds.ts";
import { WireFormatError } from "./wire_error.ts";

const COMMIT = "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b";

const REPORT: ModelCacheReport = {
  room_bytes: 50 * 2 ** 30,
  revisions: [
    {
      repo: "acme/tiny-llm",
      commit: COMMIT,
      bytes: 1000,
      state: "complete",
      bytes_done: 1000,
      last_used: 1_700_000_000_000,
      pinned: false,
    },
  ],
  omitted: 0,
  evicted: [{ repo: "acme/old", commit: COMMIT, bytes: 10, at: 1, reason: "disk over 90%" }],
};

Deno.test("model_cache: optional in a heartbeat, kept when present", () => {
  const base = { node_id: "n1", generation: 1, shards: [] };
  assertEquals(HeartbeatRequestSchema.parse(base), base);
  assertEquals(HeartbeatRequestSchema.parse({ ...base, model_cache: REPORT }).model_cache, REPORT);
});

Deno.test("model_cache: a wrong field is refused, the list is bounded", () => {
  const badCommit = { ...REPORT, revisions: [{ ...REPORT.revisions[0], commit: "main" }] };
  assertEquals(ModelCacheReportSchema.safeParse(badCommit).success, false);
  assertEquals(ModelCacheReportSchema.safeParse({ ...REPORT, room_bytes: -1 }).success, false);
  const many = Array.from({ length: REPORT_BOUNDS.cacheRevisions + 1 }, () => REPORT.revisions[0]);
  assertEquals(ModelCacheReportSchema.safeParse({ ...REPORT, revisions: many }).success, false);
  assertEquals(ModelCacheReportSchema.safeParse({ ...REPORT, room_bytes: null }).success, true);
});

Deno.test("desired models: optional, checked, named by path when wrong", () => {
  assertEquals(parseDesiredState({ generation: 2, shards: [] }), { generation: 2, shards: [] });
  const models = [{ model: "acme/tiny-llm", commit: COMMIT, pinned: true, pull: false }];
  assertEquals(parseDesiredState({ generation: 2, shards: [], models }).models, models);
  const e = assertThrows(
    () => parseDesiredState({ generation: 2, shards: [], models: [{ ...models[0], commit: "x" }] }),
    WireFormatError,
  );
  assertStringIncludes(e.message, "models[0].commit");
});
