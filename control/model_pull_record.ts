/**
 * One model revision being pulled onto nodes (control/model_pulls.ts), as
 * the control plane's state keeps it: apart, so the state names the type
 * without importing the service that uses it.
 *
 * @module
 */

/** One revision being pulled. */
export interface ModelPull {
  /** The hub id. */
  model: string;
  /** The commit. */
  commit: string;
  /** Nodes asked that do not report it held yet. */
  nodes: Set<string>;
}
