/**
 * The model facts the control plane knows (issue #25 item 6), by model:
 * learned when a deployment is applied and when the control plane opens
 * its store, read synchronously by every placement (the replica book's
 * index carries them, placement/cluster_index.ts). A model whose facts
 * could not be learned is absent: placement then refuses nothing for it.
 *
 * Keyed by the deployment's `model` today; by model and resolved commit once
 * deployments name a revision (issue #25 item 1).
 *
 * @module
 */
import type { ModelFacts } from "../models/model_facts.ts";
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

/** The facts known to this control plane. */
export class ModelFactsBook {
  readonly #source: ModelFactsSource;
  readonly #known = new Map<string, ModelFacts>();

  /** A book that learns from `source`. */
  constructor(source: ModelFactsSource) {
    this.#source = source;
  }

  /** The facts of `model`, when learned. */
  known(model: string): ModelFacts | null {
    return this.#known.get(model) ?? null;
  }

  /** Every model's facts learned so far. */
  all(): ReadonlyMap<string, ModelFacts> {
    return this.#known;
  }

  /**
   * Reads `model`'s facts from the source again and keeps them; a failure
   * keeps what was known before and says why.
   */
  async learn(model: string): Promise<Learned> {
    try {
      const facts = await this.#source.facts(model);
      if (facts !== null) this.#known.set(model, facts);
      return { facts: facts ?? this.known(model), problem: null };
    } catch (e) {
      return { facts: this.known(model), problem: errorMessage(e) };
    }
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
  const learned = await book.learn(d.model);
  const { errors, warnings } = modelIssues(d, learned.facts, (c) => classes.memoryBytes?.get(c));
  if (errors.length > 0) throw new DeploymentError("request body", errors);
  const unread = learned.problem === null ? [] : [{
    path: ["model"],
    message: `the model's memory and tensor_parallel were not checked: ${learned.problem}`,
  }];
  return { ...loaded, warnings: [...loaded.warnings, ...warnings, ...unread] };
}
