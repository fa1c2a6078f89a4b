/**
 * What a shard's failure leads to (design §9.1): a restart after a backoff,
 * or a failure reported to the control plane. Pure: the shard's state
 * machine (shard_machine.ts) gathers the facts and carries the decision out.
 *
 * A shard that fails {@link DEFAULT_CRASH_LOOP_LIMIT} times in a row without
 * staying ready is in a crash loop that restarting on this node will not
 * end (an engine that is not installed, a plugin that exits at once, a GPU
 * that faults on every load): the supervisor gives up and reports the
 * failure `permanent`, and the control plane rebuilds the replica on another
 * node or marks it failed (control/reconciler.ts).
 *
 * @module
 */
import { CRASH_LOOP_FROM } from "../protocol/agent_protocol.ts";
import { backoffDelay, type BackoffPolicy } from "./backoff.ts";

/** Failures in a row without staying ready after which the supervisor stops restarting a shard. */
export const DEFAULT_CRASH_LOOP_LIMIT = 5;

/**
 * What a failure of one run is: `restartable` when running it again could
 * help (an exit, a timeout, a port held by a stranger), `permanent` when it
 * cannot (the engine refused its arguments, the plugin refused the launch).
 * Whether the replica is then rebuilt whole is not the failure's kind but the
 * shard's: one of a multi-node replica ({@link FailureFacts.multiNode}).
 */
export type FailureKind = "restartable" | "permanent";

/** What the runner knows when a run of a shard has failed. */
export interface FailureFacts {
  /** Failures in a row without staying ready, this one included (1 for a first failure). */
  failures: number;
  /** What the failure is. */
  kind: FailureKind;
  /** Whether the shard is one of a multi-node replica, which is rebuilt whole (design §5.4). */
  multiNode: boolean;
  /** Whether the shard is still wanted (not being stopped). */
  wanted: boolean;
}

/** Bounds of the restarts. */
export interface CrashLoopPolicy {
  /** Failures in a row before giving up; {@link DEFAULT_CRASH_LOOP_LIMIT} by default. */
  limit: number;
  /** Delays between restarts. */
  backoff: BackoffPolicy;
}

/** What to do after a failure. */
export type FailureDecision =
  | {
    /** Start again after `delayMs`. */
    action: "restart";
    /** The backoff delay. */
    delayMs: number;
    /** Whether the shard now counts as crash-looping (shown so). */
    crashLoop: boolean;
  }
  | {
    /** Report the shard `failed`; the control plane decides. */
    action: "fail";
    /** Whether retrying on this node cannot help: the control plane places it elsewhere. */
    permanent: boolean;
    /** What the failure's reason starts with (a crash loop's count), or null. */
    note: string | null;
    /** What the state change adds for the operator (what happens next), or null. */
    next: string | null;
  };

/**
 * Decides what a failure leads to. A refused launch fails for good; a shard
 * of a multi-node replica fails for a rebuild; an unwanted one fails; one
 * that reached the limit of failures in a row gives up (permanent); anything
 * else restarts with backoff.
 */
export function afterFailure(facts: FailureFacts, policy: CrashLoopPolicy): FailureDecision {
  if (facts.kind === "permanent") {
    return { action: "fail", permanent: true, note: null, next: null };
  }
  if (facts.multiNode) {
    return {
      action: "fail",
      permanent: false,
      note: null,
      next: "the replica must be rebuilt whole",
    };
  }
  if (!facts.wanted) return { action: "fail", permanent: false, note: null, next: null };
  if (facts.failures >= policy.limit) {
    return {
      action: "fail",
      permanent: true,
      note: `crash loop: failed ${facts.failures} times in a row without staying ready; ` +
        "not restarted on this node again",
      next: "the replica must be placed on another node",
    };
  }
  return {
    action: "restart",
    delayMs: backoffDelay(facts.failures, policy.backoff),
    crashLoop: facts.failures >= CRASH_LOOP_FROM,
  };
}
