/**
 * How the agent's loops put an error into a log line: its message, and for a
 * control-plane error also its kind, status and code.
 *
 * @module
 */
import { errorMessage } from "../text/error_message.ts";
import { ControlError } from "./control_client.ts";

/** Log fields for `e`: a {@link ControlError} adds its kind, status and code. */
export function errorFields(e: unknown): Record<string, unknown> {
  if (e instanceof ControlError) {
    return { error: e.message, kind: e.kind, status: e.status, code: e.code };
  }
  return { error: errorMessage(e) };
}
