/**
 * What the replica page says about a replica's placement when it has none
 * running, and what its explanation is: a failed or rebuilding replica keeps
 * the explanation of its last placement ("placed … fits"), which beside a bare
 * "Not placed" reads as a contradiction (issue #23 item 10).
 *
 * @module
 */
import type { ReplicaView } from "../control/views.ts";

/** The placement panel's texts for one replica. */
export interface PlacementTexts {
  /** What the placement panel says when no shard is placed; null when some are. */
  empty: string | null;
  /** The heading of the explanation panel. */
  heading: string;
}

/** Whether the explanation is of a placement that succeeded (one profile fit). */
function explainsPlacement(r: Pick<ReplicaView, "explanation">): boolean {
  return r.explanation?.profiles.some((p) => p.fits) ?? false;
}

/** The placement panel's texts: why nothing is placed, and what the explanation below explains. */
export function placementTexts(
  r: Pick<ReplicaView, "state" | "shards" | "explanation" | "failure">,
): PlacementTexts {
  if (r.shards.length > 0) return { empty: null, heading: "Why here" };
  const lastPlacement = explainsPlacement(r);
  if (r.state === "failed") {
    const where = r.failure === null ? "" : ` on ${r.failure.node}`;
    return {
      empty: `Not running: it failed${where} and its GPUs were released; ` +
        "it is not placed again until its deployment changes.",
      heading: lastPlacement ? "Last placement, before it failed" : "Why not placed",
    };
  }
  if (lastPlacement) {
    return {
      empty: "Not running: its shards were stopped and it is waiting to be placed again.",
      heading: "Last placement",
    };
  }
  return {
    empty: r.explanation === null
      ? "Not placed yet: waiting for the first placement attempt."
      : "Not placed: no node fits now (see why below).",
    heading: "Why not placed",
  };
}
