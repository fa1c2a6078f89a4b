/**
 * One model revision pulled onto nodes (control/model_pulls.ts), as the
 * control plane's state and its store keep it: apart, so the state and the
 * store name the type without importing the service that uses it. Stored
 * (design §11), so a restarted or failed-over control plane keeps asking
 * agents for the pulls not done; finished ones are kept a while for listing.
 * The shape is the listing's (protocol/model_admin.ts), less its derived state.
 *
 * @module
 */
import type { ModelPullView, PullNodeView } from "../protocol/model_admin.ts";

/** One node's part of a pull. */
export type PullNode = PullNodeView;

/** One revision being pulled, or pulled lately; keyed by `id` (`repo@commit`). */
export type ModelPull = Omit<ModelPullView, "state">;

/** What a store keeps of pulls (a part of control/store/store.ts `ControlStore`). */
export interface ModelPullStore {
  /** Every pull, by id. */
  listModelPulls(): Promise<ModelPull[]>;
  /** Creates or replaces a pull. */
  putModelPull(p: ModelPull): Promise<void>;
  /** Deletes a pull; false when there was none. */
  deleteModelPull(id: string): Promise<boolean>;
}
