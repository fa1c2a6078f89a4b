/**
 * Paths to the recorded fixtures, for tests.
 *
 * @module
 */
import { fileURLToPath } from "node:url";

/** Absolute path of a file under tests/fixtures. */
export function fixturePath(relative: string): string {
  return fileURLToPath(new URL(`./fixtures/${relative}`, import.meta.url));
}

/** Reads a fixture file as text. */
export function readFixture(relative: string): string {
  return Deno.readTextFileSync(fixturePath(relative));
}
