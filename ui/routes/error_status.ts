/**
 * The HTTP status the dashboard answers a domain error with, as the API
 * answers the same errors.
 *
 * @module
 */
import { domainErrorStatus } from "../../control/error_status.ts";
import { ControlError } from "../../control/errors.ts";
import { StoreError } from "../../control/store/store.ts";
import { FleetQueryError } from "../fleet_model.ts";

/**
 * The HTTP status of an error a route may throw, or null for one that is no
 * domain error (a bug: it propagates).
 */
export function errorStatus(e: unknown): number | null {
  if (e instanceof FleetQueryError) return 400;
  // Another ControlError is bad input.
  if (e instanceof ControlError) return domainErrorStatus(e) ?? 400;
  if (e instanceof StoreError) return 503;
  return null;
}
