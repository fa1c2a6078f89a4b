/**
 * A compile-time check that two types are the same, for keeping a
 * hand-written interface (with its JSDoc) and the zod schema that checks it
 * on the wire from drifting apart: `deno check` fails when they differ.
 *
 * @module
 */

/** `true` when `A` and `B` are the same type (not merely assignable either way). */
export type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2)
  ? true
  : false;

/** Compiles only when `T` is `true`: `type _Check = Assert<Same<A, B>>`. */
export type Assert<T extends true> = T;
