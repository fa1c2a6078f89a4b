/**
 * The HTTP status of each domain error (errors.ts): one table for the API's
 * `onError` and the dashboard's pages, so both answer an error alike.
 *
 * @module
 */
import {
  AgentUnavailableError,
  ConflictError,
  type ControlError,
  ForbiddenError,
  InvalidInputError,
  NotFoundError,
  NotSettledError,
} from "./errors.ts";

const STATUS: readonly [new (...args: never[]) => ControlError, number][] = [
  [InvalidInputError, 400],
  [ForbiddenError, 403],
  [NotFoundError, 404],
  [ConflictError, 409],
  [AgentUnavailableError, 502],
  [NotSettledError, 503],
];

/** The status of a domain error, or null when `err` is none of the classes above. */
export function domainErrorStatus(err: unknown): number | null {
  return STATUS.find(([cls]) => err instanceof cls)?.[1] ?? null;
}
