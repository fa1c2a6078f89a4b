/**
 * Waiting for the signal that stops a long-running command (`control
 * serve`, `gateway serve`, `dev`).
 *
 * Deno installs its handler for SIGHUP, SIGINT and SIGTERM together, at the
 * first listener added for any of them; until a listener for one of them is
 * added, that signal still ends the process as if unhandled. Measured on
 * Deno 2.9.6: a SIGTERM that arrives between a SIGINT listener and the
 * SIGTERM one exits 143, and a process preempted there (a loaded host) is
 * easy to hit. So SIGTERM, what systemd and the tests send, is listened for
 * first.
 *
 * @module
 */

/** Adds a listener for one signal (Deno.addSignalListener, or a test's recorder). */
export type AddSignalListener = (signal: Deno.Signal, handler: () => void) => void;

/** The signals that stop a command, SIGTERM first (see the module comment). */
export const STOP_SIGNALS: readonly Deno.Signal[] = ["SIGTERM", "SIGINT"];

/**
 * Resolves with the first of `signals` received. SIGTERM is listened for
 * before the others, whatever the order given.
 */
export function stopSignal(
  signals: readonly Deno.Signal[] = STOP_SIGNALS,
  add: AddSignalListener = Deno.addSignalListener,
): Promise<Deno.Signal> {
  const ordered = [...signals].sort((a, b) => Number(b === "SIGTERM") - Number(a === "SIGTERM"));
  return new Promise((resolve) => {
    for (const s of ordered) add(s, () => resolve(s));
  });
}
