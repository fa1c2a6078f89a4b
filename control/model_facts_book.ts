/**
 * The model facts the control plane knows (issue #25 item 6), by model:
 * learned when a deployment is applied and when the control plane opens
 * its store, read synchronously by every placement (the replica book's
 * index carries them, placement/cluster_index.ts). A model whose facts
 * could not be learned is absent: placement then refuses nothing for it.
 *
 * Keyed by model and revision (`factsKey`: `org/name@main`; a local path
 * alone), as the deployment names them; the revision's resolved commit is
 * not part of the key, so a branch that moves keeps its first facts until
 * the control plane restarts. Facts once learned are
 * kept until the control plane restarts (GitOps loops re-apply constantly;
 * the hub is not asked each time); a failure is not asked again for
 * {@link RETRY_FAILED_MS}, so a fleet without hub access waits on it once.
 *
 * @module
 */
import { factsKey, type ModelFacts } from "../models/model_facts.ts";
import { modelRevision } from "../deployment/model_revision.ts";
import type { ModelFactsSource } from "../models/facts_source.ts";
import { errorMessage } from "../text/error_message.ts";
import { DeploymentError, type LoadedDeployment } from "../deployment/load.ts";
import { modelIssues } from "../deployment/model_fit.ts";
import type { ClassFacts } from "../deployment/validate.ts";

/** What learning a model's facts gave. */
export interface Learned {
  /** The facts; null when unknown. */
  facts: ModelFacts | null;
  /** Why they are unknown when the source failed or the files are bad; null otherwise. */
  problem: string | null;
}

/** How long a model whose facts could not be read is left before it is asked again. */
export const RETRY_FAILED_MS = 5 * 60_000;

/** The facts known to this control plane. */
export class ModelFactsBook {
  readonly #source: ModelFactsSource;
  readonly #now: () => number;
  readonly #known = new Map<string, ModelFacts>();
  readonly #failed = new Map<string, { problem: string; at: number }>();
  #learning: Promise<unknown> = Promise.resolve();

  /** A book that learns from `source`; `now` is the control plane's clock. */
  constructor(source: ModelFactsSource, now: () => number) {
    this.#source = source;
    this.#now = now;
  }

  /**
   * The facts of `model` at `revision` (default: the deployment default,
   * `main` for a hub id), when learned.
   */
  known(model: string, revision = modelRevision(model, undefined)): ModelFacts | null {
    return this.#known.get(factsKey(model, revision)) ?? null;
  }

  /** Every model revision's facts learned so far, by {@link factsKey}. */
  all(): ReadonlyMap<string, ModelFacts> {
    return this.#known;
  }

  /**
   * `model`'s facts: those known, else read from the source and kept; a
   * failure says why, and is answered again without asking until
   * {@link RETRY_FAILED_MS} has passed.
   */
  async learn(model: string, revision = modelRevision(model, undefined)): Promise<Learned> {
    const key = factsKey(model, revision);
    const known = this.#known.get(key);
    if (known !== undefined) return { facts: known, problem: null };
    const failed = this.#failed.get(key);
    if (failed !== undefined && this.#now() - failed.at < RETRY_FAILED_MS) {
      return { facts: null, problem: failed.problem };
    }
    try {
      const facts = await this.#source.facts(model, revision);
      this.#failed.delete(key);
      if (facts !== null) this.#known.set(key, facts);
      return { facts, problem: null };
    } catch (e) {
      const problem = errorMessage(e);
      this.#failed.set(key, { problem, at: this.#now() });
      return { facts: null, problem };
    }
  }

  /**
   * Learns every model in the background (opening a store must not wait on
   * a slow hub), then calls `done`; placement meanwhile refuses nothing for
   * them. {@link settled} resolves once it is over.
   */
  learnInBackground(
    models: Iterable<string | { model: string; revision?: string }>,
    done: () => void,
  ): void {
    const refs = [...models].map((m) => typeof m === "string" ? { model: m } : m);
    const all = Promise.all(refs.map((m) => this.learn(m.model, m.revision))).then(done);
    this.#learning = Promise.all([this.#learning, all]);
  }

  /** Resolves when every background learning started so far is over. */
  async settled(): Promise<void> {
    await this.#learning;
  }
}

/**
 * Learns a deployment's model's facts into `book` and checks its profiles
 * against them (deployment/model_fit.ts), as `apply` does before anything is
 * stored: a tensor_parallel that does not divide the heads, or a model no
 * profile's GPU class can hold, refuse it; a profile too small beside one
 * that fits, or facts that cannot be read, are warnings (placement then
 * refuses nothing for an unknown model).
 *
 * @throws {DeploymentError} Naming each refused profile and field.
 */
export async function checkModel(
  book: ModelFactsBook,
  loaded: LoadedDeployment,
  classes: ClassFacts,
): Promise<LoadedDeployment> {
  const d = loaded.deployment;
  const learned = await book.learn(d.model, d.revision);
  const { errors, warnings } = modelIssues(d, learned.facts, (c) => classes.memoryBytes?.get(c));
  if (errors.length > 0) throw new DeploymentError("request body", errors);
  const unread = learned.problem === null ? [] : [{
    path: ["model"],
    message: `the model's memory and tensor_parallel were not checked: ${learned.problem}`,
  }];
  return { ...loaded, warnings: [...loaded.warnings, ...warnings, ...unread] };
}
