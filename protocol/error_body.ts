/**
 * The error body every llmgw HTTP API answers a failure with, and how its
 * clients (the CLI, the agent, gateways) read one: declared once.
 *
 * @module
 */
import { z } from "zod";

/** The error body every failure answers with (control plane, agent API, gateway polls). */
export const ErrorBodySchema = z.object({
  error: z.object({
    code: z.string().max(128).describe("Stable error code, e.g. not_found, invalid_request"),
    message: z.string().max(4096).describe("What was wrong and where"),
    path: z.string().nullable().optional().describe("The field path, for bad input"),
  }),
});

/** The error body every failure answers with. */
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/**
 * The `{code, message}` of an error answer's text, or null when it is not
 * an error body (a proxy's HTML page, say): clients then show the text.
 */
export function readErrorBody(text: string): ErrorBody["error"] | null {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return null;
  }
  const parsed = ErrorBodySchema.safeParse(json);
  return parsed.success ? parsed.data.error : null;
}
