/**
 * What an apply (or its dry run) tells the CLI besides the deployment: what
 * it did, each field that changed, and which replicas a new revision rolls
 * (design §6.3). Declared once here; the control plane's answer schema
 * (protocol/admin_protocol.ts) and `llmgw apply` read these.
 *
 * @module
 */
import { z } from "zod";

/**
 * What an apply did, as kubectl says it: `created`; `updated` (a new
 * revision, its replicas roll); `scaled` (the replica count alone);
 * `configured` (settings that restart nothing: routing, rollout settings,
 * with or without the count); `unchanged` (nothing stored, nothing restarts).
 */
export const APPLY_RESULTS = ["created", "updated", "scaled", "configured", "unchanged"] as const;

/** One of {@link APPLY_RESULTS}. */
export const ApplyResultKindSchema = z.enum(APPLY_RESULTS)
  .describe("What the apply did (or, in a dry run, would do)");

/** One of {@link APPLY_RESULTS}. */
export type ApplyResultKind = z.infer<typeof ApplyResultKindSchema>;

/** One field that differs between the live spec and the applied one, both with defaults applied. */
export const SpecChangeSchema = z.object({
  path: z.string().describe("The field, e.g. profiles[0].engine_args"),
  from: z.unknown().optional().describe("The live value; absent when the field is new"),
  to: z.unknown().optional().describe("The applied value; absent when the field is gone"),
  rolls: z.boolean().describe("Whether this change makes a new revision that replaces replicas"),
});

/** One field that differs between two specs (deployment/canonical.ts). */
export type SpecChange = z.infer<typeof SpecChangeSchema>;

/**
 * A change as one line, for events and `llmgw apply`:
 * `profiles[0].quantization: "fp8" → "none"`. An `env` value may be a
 * secret (a hub token), so only its name is shown; a whole object (an added
 * profile) is `{…}`: the JSON answer has it in full.
 */
export function describeChange(c: SpecChange): string {
  if (/(^|\.)env(\.|$)/.test(c.path)) return `${c.path}: changed (values not shown)`;
  const show = (v: unknown) =>
    v === undefined
      ? "(absent)"
      : typeof v === "object" && v !== null && !Array.isArray(v)
      ? "{…}"
      : JSON.stringify(v);
  return `${c.path}: ${show(c.from)} → ${show(c.to)}`;
}
