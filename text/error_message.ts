/**
 * The message of anything thrown: one rule for every role, so a log line, a
 * refusal or an event says the same words for the same failure.
 *
 * @module
 */

/**
 * The message of `e`: an Error's `message`, anything else as `String(e)`
 * (a thrown string is its own message).
 */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
