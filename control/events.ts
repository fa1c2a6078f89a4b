/**
 * Events: what happened, for `llmgw events` and `describe`. Written through
 * the state (state.ts `event`); this file holds the reading side and the
 * texts that carry a failure's log.
 *
 * @module
 */
import type { ShardReport } from "../protocol/agent_protocol.ts";
import { incarnationFilter } from "./identity.ts";
import type { ControlState } from "./state.ts";
import type { EventQuery, EventRecord } from "./store/store.ts";

/** A query of events as the API takes it. */
export interface EventListQuery extends Omit<EventQuery, "uid"> {
  /** current (the default), all, or a uid: see control/identity.ts `incarnationFilter`. */
  incarnation?: string;
}

/** Log lines of a failure kept in its event. */
export const FAILURE_TAIL_LINES = 20;

/** The end of a failure's log as kept in events: at most 20 lines of at most 500 characters. */
export function failureTail(lines: readonly string[]): string[] {
  return lines.slice(-FAILURE_TAIL_LINES).map((l) => l.slice(0, 500));
}

/** An event's text for a shard failure: the reason, then the end of its log. */
export function shardFailureMessage(
  shardId: string,
  node: string,
  f: Pick<NonNullable<ShardReport["last_failure"]>, "reason" | "log_tail">,
): string {
  const tail = failureTail(f.log_tail);
  return `shard ${shardId} on ${node} failed: ${f.reason}` +
    (tail.length > 0 ? `\nlast ${tail.length} log lines:\n${tail.join("\n")}` : "");
}

/** Reads events. */
export class EventLog {
  readonly #state: ControlState;

  /** Creates the reader. */
  constructor(state: ControlState) {
    this.#state = state;
  }

  /**
   * Recent events, oldest first, including those still queued for the store;
   * of one subject, those of its current incarnation unless asked otherwise.
   */
  async list(q: EventListQuery = {}): Promise<EventRecord[]> {
    const { incarnation, ...rest } = q;
    const uid = incarnationFilter(this.#state, q.subject, incarnation);
    await this.#state.flushEvents();
    return await this.#state.store.listEvents(uid === undefined ? rest : { ...rest, uid });
  }
}
