/**
 * Recognises an engine that refused its command line: Python's argparse,
 * which vLLM and SGLang parse their flags with, prints
 * `PROG: error: MESSAGE` after the usage text and exits with status 2.
 * Restarting such an engine can never succeed, so the supervisor reports the
 * failure as permanent instead of backing off forever.
 *
 * @module
 */

/** argparse's exit status for a usage error. */
export const ARGPARSE_USAGE_EXIT = 2;

const ERROR_LINE = /^\S.*?: error: (.+)$/;

/**
 * The argparse error message when an engine exited because it refused its
 * arguments, else null: exit status 2 and a `PROG: error: …` line in the
 * last lines of its log (the last such line wins).
 */
export function argumentRefusal(
  exitCode: number | null,
  logTail: readonly string[],
): string | null {
  if (exitCode !== ARGPARSE_USAGE_EXIT) return null;
  for (let i = logTail.length - 1; i >= 0; i--) {
    const m = ERROR_LINE.exec(logTail[i].trimEnd());
    if (m !== null) return m[1];
  }
  return null;
}
