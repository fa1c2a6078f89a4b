/**
 * Leadership among control planes (issue #15), as clients see it: who leads,
 * and the refusal a control plane answers with when it cannot act on a
 * request. Agents, gateways and the CLI move to their next control-plane URL
 * on a connection failure or on one of {@link FAILOVER_CODES}.
 *
 * @module
 */
import { z } from "zod";

/** Error codes after which a client tries its next control-plane URL. */
export const FAILOVER_CODES: readonly string[] = ["not_leader", "store_unavailable"];

/** The header a follower marks a request it forwards with (never forwarded twice). */
export const FORWARDED_BY_HEADER = "x-llmgw-forwarded-by";

/**
 * The header on an answer a follower forwarded: the leader's URL, so a
 * client that lists it talks to the leader directly from then on.
 */
export const LEADER_HEADER = "x-llmgw-leader";

/** The header on an answer served from a control plane's last known state. */
export const READ_ONLY_HEADER = "x-llmgw-read-only";

/** `GET /v1/leader`: this instance's role and who leads. */
export const LeadershipAnswer = z.object({
  mode: z.enum(["single", "shared"]).describe(
    "single: a store of its own (SQLite); shared: several control planes on PostgreSQL",
  ),
  role: z.enum(["leader", "follower", "read_only"]).describe(
    "read_only: no leader is known or the store is unreachable; reads come from the last known state",
  ),
  holder: z.string().describe("this instance's id"),
  epoch: z.number().int().nonnegative().describe("the current leadership term, as last read"),
  leader: z.string().nullable().describe("the leader's URL; null when none is known"),
  reason: z.string().nullable().describe("why this instance is read-only, when it is"),
});

/** {@link LeadershipAnswer} as a type. */
export type Leadership = z.infer<typeof LeadershipAnswer>;

/** The leadership of a control plane on a store of its own. */
export function singleLeadership(holder: string): Leadership {
  return { mode: "single", role: "leader", holder, epoch: 0, leader: null, reason: null };
}

/** An error body's code, when it is one of llmgw's `{error: {code}}` bodies. */
export function errorCode(body: unknown): string | null {
  const code = (body as { error?: { code?: unknown } } | null)?.error?.code;
  return typeof code === "string" ? code : null;
}
