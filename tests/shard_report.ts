/**
 * A shard report as an agent sends it, for tests of the agent's reports, the
 * wire schema and the control plane alike.
 *
 * @module
 */
import type { ShardReport } from "../protocol/agent_protocol.ts";

/** A shard report as an agent sends it, `state` with `extra` over it. */
export function shardReport(
  id: string,
  state: ShardReport["state"],
  extra: Partial<ShardReport> = {},
): ShardReport {
  return {
    id,
    state,
    since: 0,
    pid: state === "failed" ? null : 4242,
    port: 8000,
    serves_http: true,
    progress: null,
    restarts: 0,
    adopted: false,
    last_failure: null,
    spec_hash: "h",
    ...extra,
  };
}
