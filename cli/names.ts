/**
 * Commands that take several names (`cordon A B C`, `get nodes A B`,
 * `delete node A B`), as kubectl does: each name is acted on in turn and its
 * result printed; a name the control plane refuses is reported on standard
 * error and the others go on; the exit code is 1 when any failed
 * (docs/cli.md). Commands that take one name refuse the rest with a usage
 * error ({@link refuseExtra}).
 *
 * @module
 */
import { AdminError } from "./admin_client.ts";
import { UsageError } from "./usage_error.ts";

/** What acting on each name gave. */
export interface EachResult<T> {
  /** The results of the names that succeeded, in order. */
  results: T[];
  /** How many names failed. */
  failed: number;
}

/**
 * Runs `act` for each name in order. An {@link AdminError} (the control
 * plane refused or could not be reached) is written to `err` as one line
 * and the next name follows; any other error ends the command.
 */
export async function eachName<T>(
  names: readonly string[],
  act: (name: string) => Promise<T>,
  err: (text: string) => void,
): Promise<EachResult<T>> {
  const results: T[] = [];
  let failed = 0;
  for (const name of names) {
    try {
      results.push(await act(name));
    } catch (e) {
      if (!(e instanceof AdminError)) throw e;
      err(`llmgw: ${e.message}\n`);
      failed++;
    }
  }
  return { results, failed };
}

/** The exit code of a command over several names: 1 when any failed. */
export function exitCode(r: EachResult<unknown>): number {
  return r.failed > 0 ? 1 : 0;
}

/**
 * What `--json` prints for names given: the one object for one name (as
 * before lists), an array for several.
 */
export function oneOrMany<T>(names: readonly string[], results: T[]): T | T[] {
  return names.length === 1 && results.length === 1 ? results[0] : results;
}

/**
 * Refuses arguments past the ones a command takes, naming the first.
 *
 * @throws {UsageError} E.g. `scale: unexpected argument "2"; scale takes one DEPLOYMENT and N`.
 */
export function refuseExtra(
  verb: string,
  positionals: readonly string[],
  takes: readonly string[],
): void {
  if (positionals.length <= takes.length) return;
  throw new UsageError(
    `${verb}: unexpected argument "${positionals[takes.length]}"; ${verb} takes ${
      takes.length === 0 ? "no argument" : takes.join(" and ")
    }`,
    verb.split(" ")[0],
  );
}
