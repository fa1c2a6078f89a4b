/**
 * Who runs a pass after a change: services call {@link Wake.kick} through
 * the state, and the one reconciler answers it. The control plane hands the
 * same Wake to both constructors, so the wiring reads in one place
 * (control_plane.ts) instead of a field overwritten after construction.
 *
 * @module
 */

/** A request for a reconcile pass soon. */
export class Wake {
  #answer: (() => void) | null = null;

  /** Asks for a pass soon; nothing happens until a reconciler answers. */
  kick(): void {
    this.#answer?.();
  }

  /**
   * Makes `answer` what a kick runs: the reconciler's debounced pass.
   *
   * @throws {Error} When another reconciler answers already: two loops on one state.
   */
  answerWith(answer: () => void): void {
    if (this.#answer !== null) {
      throw new Error("Cannot answer a wake: a reconciler answers it already");
    }
    this.#answer = answer;
  }
}
