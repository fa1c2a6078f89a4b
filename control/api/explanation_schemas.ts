/**
 * The live explanation's answer (control/live_explanation.ts).
 *
 * @module
 */
import { z } from "zod";
import { ReplicaViewSchema } from "./schemas.ts";

/** `GET /v1/replicas/:id/explanation`. */
export const LiveExplanationAnswer = z.object({
  replica: ReplicaViewSchema,
  live: z.looseObject({}).nullable().describe(
    "Where the replica would be placed now on the live inventory, its own GPUs counted free; " +
      "null when its deployment is gone",
  ),
  detail: z.enum(["full", "grouped"]).describe(
    "full: every rejected node is named; grouped: rejections are counted by reason",
  ),
  nodes: z.number().int().describe("Nodes in the live inventory"),
});
