/**
 * The HTTP status the dashboard answers a domain error with, as the API
 * answers the same errors.
 *
 * @module
 */
import {
  AgentUnavailableError,
  ConflictError,
  ControlError,
  ForbiddenError,
  InvalidInputError,
  NotFoundError,
  NotSettledError,
} from "../../control/errors.ts";
import { StoreError } from "../../control/store.ts";
import { FleetQueryError } from "../fleet_model.ts";

/** The HTTP status of each domain error class; another ControlError is 400. */
const STATUS: readonly [new (...args: never[]) => ControlError, number][] = [
  [InvalidInputError, 400],
  [ForbiddenError, 403],
  [NotFoundError, 404],
  [ConflictError, 409],
  [AgentUnavailableError, 502],
  [NotSettledError, 503],
];

/**
 * The HTTP status of an error a route may throw, or null for one that is no
 * domain error (a bug: it propagates).
 */
export function errorStatus(e: unknown): number | null {
  if (e instanceof FleetQueryError) return 400;
  if (e instanceof ControlError) return STATUS.find(([cls]) => e instanceof cls)?.[1] ?? 400;
  if (e instanceof StoreError) return 503;
  return null;
}
