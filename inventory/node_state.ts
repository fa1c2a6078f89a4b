/**
 * The node lifecycle of design §4, pure: no clocks, no timers. A node's state
 * has two independent parts:
 *
 * - **liveness**, which the agent's heartbeats decide: `ready`, then
 *   `unreachable` after a while without a heartbeat, then `lost`;
 * - **operator intent**, which only the operator decides: `none`, `cordoned`
 *   or `draining`. Nothing the agent sends clears it (design §1.3).
 *
 * The reported {@link NodeState} combines them, the most severe first:
 * `lost` > `unreachable` > `draining` > `cordoned` > `ready`. Keeping the two
 * apart is what lets a cordon survive a node going unreachable and coming
 * back.
 *
 * @example
 * ```ts
 * import { DEFAULT_LIVENESS_THRESHOLDS, livenessAt, nodeState } from "./node_state.ts";
 * const liveness = livenessAt(0, 20_000, DEFAULT_LIVENESS_THRESHOLDS); // "unreachable"
 * nodeState(liveness, "cordoned"); // "unreachable"
 * nodeState("ready", "cordoned"); // "cordoned"
 * ```
 *
 * @module
 */
import type { NodeState } from "./types.ts";

/** What heartbeats say about a node (design §4). */
export type Liveness = "ready" | "unreachable" | "lost";

/** All liveness values, least severe first. */
export const LIVENESS_VALUES: readonly Liveness[] = ["ready", "unreachable", "lost"];

/**
 * What the operator wants of a node (design §4, §1.3). `draining` implies
 * `cordoned`: a draining node takes no new placements either.
 */
export type OperatorIntent = "none" | "cordoned" | "draining";

/** All operator intents, weakest first. */
export const OPERATOR_INTENTS: readonly OperatorIntent[] = ["none", "cordoned", "draining"];

/**
 * Heartbeat timing (design §4). Config values, so snake_case like the rest of
 * the configuration files.
 */
export interface LivenessThresholds {
  /** How often agents heartbeat, in ms. Not used to judge liveness; agents are told it. */
  heartbeat_interval_ms: number;
  /** A node with no heartbeat for this long is `unreachable`, in ms. */
  unreachable_after_ms: number;
  /** A node with no heartbeat for this long is `lost`, in ms. */
  lost_after_ms: number;
}

/** Design §4's defaults: heartbeat every 5 s, unreachable after 15 s, lost after 60 s. */
export const DEFAULT_LIVENESS_THRESHOLDS: Readonly<LivenessThresholds> = Object.freeze({
  heartbeat_interval_ms: 5_000,
  unreachable_after_ms: 15_000,
  lost_after_ms: 60_000,
});

/** Raised for heartbeat thresholds that cannot work. */
export class LivenessThresholdsError extends Error {
  /** Creates the error; `message` names the offending value. */
  constructor(message: string) {
    super(message);
    this.name = "LivenessThresholdsError";
  }
}

/**
 * Fills in defaults for missing thresholds and checks the result: every value
 * a positive finite number, and heartbeat interval < unreachable < lost (a
 * node heartbeating on time must never look unreachable).
 *
 * @throws {LivenessThresholdsError} Naming the bad value.
 */
export function livenessThresholds(
  partial: Partial<LivenessThresholds> = {},
): LivenessThresholds {
  const t: LivenessThresholds = { ...DEFAULT_LIVENESS_THRESHOLDS, ...partial };
  for (const key of Object.keys(DEFAULT_LIVENESS_THRESHOLDS) as (keyof LivenessThresholds)[]) {
    const v = t[key];
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) {
      throw new LivenessThresholdsError(
        `Cannot use liveness threshold ${key}=${v}: must be a positive number of milliseconds`,
      );
    }
  }
  if (t.unreachable_after_ms <= t.heartbeat_interval_ms) {
    throw new LivenessThresholdsError(
      `Cannot use unreachable_after_ms=${t.unreachable_after_ms}: must exceed ` +
        `heartbeat_interval_ms=${t.heartbeat_interval_ms}, or nodes on time look unreachable`,
    );
  }
  if (t.lost_after_ms <= t.unreachable_after_ms) {
    throw new LivenessThresholdsError(
      `Cannot use lost_after_ms=${t.lost_after_ms}: must exceed ` +
        `unreachable_after_ms=${t.unreachable_after_ms}`,
    );
  }
  return t;
}

/**
 * A node's liveness at `nowMs`, given when it was last heard from (design §4).
 * A node is `unreachable` once `unreachable_after_ms` have passed without a
 * heartbeat (the boundary included), and `lost` once `lost_after_ms` have. A
 * `lastSeenMs` in the future (a clock step back) counts as just seen.
 */
export function livenessAt(
  lastSeenMs: number,
  nowMs: number,
  thresholds: Readonly<LivenessThresholds> = DEFAULT_LIVENESS_THRESHOLDS,
): Liveness {
  const silentMs = nowMs - lastSeenMs;
  if (silentMs >= thresholds.lost_after_ms) return "lost";
  if (silentMs >= thresholds.unreachable_after_ms) return "unreachable";
  return "ready";
}

/** The more severe of two liveness values (`lost` > `unreachable` > `ready`). */
export function worseLiveness(a: Liveness, b: Liveness): Liveness {
  return LIVENESS_VALUES.indexOf(a) >= LIVENESS_VALUES.indexOf(b) ? a : b;
}

/**
 * The state reported for a node (design §4): liveness problems first, then the
 * operator's intent: `lost` > `unreachable` > `draining` > `cordoned` >
 * `ready`. Only `ready` accepts new placements.
 */
export function nodeState(liveness: Liveness, intent: OperatorIntent): NodeState {
  if (liveness !== "ready") return liveness;
  if (intent !== "none") return intent;
  return "ready";
}
