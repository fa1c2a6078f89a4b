/**
 * Assertions for tests: Node's `node:assert/strict`, standing in for
 * `@std/assert`, which is published only on JSR (unreachable from these
 * machines). Kept to the names @std/assert uses so a later switch is a
 * one-line change.
 *
 * @module
 */
import assert from "node:assert/strict";

/** Asserts deep equality. */
export function assertEquals<T>(actual: unknown, expected: T, message?: string): void {
  assert.deepStrictEqual(actual, expected, message);
}

/** Asserts that a value is truthy. */
export function assertOk(value: unknown, message?: string): asserts value {
  assert.ok(value, message);
}

/** Asserts that `text` contains `part`. */
export function assertStringIncludes(text: string, part: string, message?: string): void {
  assert.ok(
    text.includes(part),
    message ?? `expected ${JSON.stringify(text)} to include ${JSON.stringify(part)}`,
  );
}

/** Asserts that `fn` throws an error of `errorClass` whose message includes `includes`. */
export function assertThrows(
  fn: () => unknown,
  errorClass: new (...args: never[]) => Error,
  includes?: string,
): Error {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof errorClass, `expected ${errorClass.name}, got ${String(caught)}`);
  if (includes !== undefined) assertStringIncludes((caught as Error).message, includes);
  return caught as Error;
}

/** Async variant of {@link assertThrows}. */
export async function assertRejects(
  fn: () => Promise<unknown>,
  errorClass: new (...args: never[]) => Error,
  includes?: string,
): Promise<Error> {
  let caught: unknown;
  try {
    await fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof errorClass, `expected ${errorClass.name}, got ${String(caught)}`);
  if (includes !== undefined) assertStringIncludes((caught as Error).message, includes);
  return caught as Error;
}
