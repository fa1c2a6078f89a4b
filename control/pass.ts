/**
 * What a reconcile pass carries from step to step (control/reconciler.ts):
 * the books, the replica book that writes every replica transition (and
 * keeps the pass's one cluster index), the desired states published at the
 * end, and what the reconciler remembers between passes.
 *
 * @module
 */
import type { DesiredStates } from "./desired.ts";
import type { ReplicaBook } from "./replicas.ts";
import type { ControlState } from "./state.ts";

/** What a step of a pass works on. */
export interface Pass {
  /** The books. */
  state: ControlState;
  /** The replica book: every replica transition, and the pass's cluster index. */
  book: ReplicaBook;
  /** Desired states, published at the end of the pass. */
  desired: DesiredStates;
  /** Rebuilds in a row after a shard failure, by replica id, until it is ready (crash loops). */
  rebuilds: Map<string, number>;
  /** Draining nodes already announced as drained. */
  drained: Set<string>;
  /** The time of this pass. */
  now: number;
}

/** One named step of a pass. */
export interface ReconcileStep {
  /** The step's name, for logs. */
  name: string;
  /** Runs the step. */
  run(pass: Pass): Promise<void>;
}
