/**
 * The model facts the control plane knows (issue #25 item 6), by model:
 * learned when a deployment is applied and when the control plane opens
 * its store, read synchronously by every placement (the replica book's
 * index carries them, placement/cluster_index.ts). A model whose facts
 * could not be learned is absent: placement then refuses nothing for it.
 *
 * Keyed by model and the commit its revision resolved to (`factsKey`:
 * `org/name@<commit>`), read from the hub at that commit, so a branch that
 * moves (a new deployment revision at a new commit) is read again; by model
 * and revision (`org/name@main`) while the commit is unknown; a local path
 * alone. Facts once learned are kept until the control plane restarts
 * (GitOps loops re-apply constantly; the hub is not asked each time); a
 * failure is not asked again for {@link RETRY_FAILED_MS}, so a fleet
 * without hub access waits on it once.
 *
 * @module
 */
import { factsKey, type ModelFacts } from "../models/model_facts.ts";
import { modelRevision } from "../deployment/model_revision.ts";
import type { ModelFactsSource } from "../models/facts_source.ts";
import { errorMessage } from "../text/error_message.ts";
import { DeploymentError, type LoadedDeployment } from "../deployment/load.ts";
import { modelIssues } from "../deployment/model_fit.ts";
import type { ClassFacts, DeploymentIssue } from "../deployment/validate.ts";
import type { StoredDeployment } from "./store/store.ts";

/** A model revision whose facts are asked for: the commit when its revision resolved to one. */
export interface FactsRef {
  /** The model (hub id or path). */
  model: string;
  /** The revision the deployment names; undefined: the default (`main` for a hub id). */
  revision?: string;
  /** The commit it resolved to; null or absent while unknown. */
  commit?: string | null;
}

/** The model revision each deployment's current revision runs, with its commit when resolved. */
export function deploymentFacts(deployments: Iterable<StoredDeployment>): FactsRef[] {
  return [...deployments].map((d) => ({
    model: d.spec.model,
    revision: d.spec.revision,
    commit: d.model_commit ?? null,
  }));
}

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
  /** Keys being learned in the background, and those no source serves. */
  readonly #busy = new Set<string>();
  readonly #unserved = new Set<string>();
  #learning: Promise<unknown> = Promise.resolve();

  /** A book that learns from `source`; `now` is the control plane's clock. */
  constructor(source: ModelFactsSource, now: () => number) {
    this.#source = source;
    this.#now = now;
  }

  /**
   * The facts of `model` at `commit` when given, else at `revision`
   * (default: the deployment default, `main` for a hub id), when learned.
   */
  known(
    model: string,
    revision = modelRevision(model, undefined),
    commit?: string | null,
  ): ModelFacts | null {
    return this.#known.get(factsKey(model, revision, commit)) ?? null;
  }

  /** Every model revision's facts learned so far, by {@link factsKey}. */
  all(): ReadonlyMap<string, ModelFacts> {
    return this.#known;
  }

  /**
   * `model`'s facts at `commit` when given (the source reads that commit),
   * else at `revision`: those known, else read from the source and kept; a
   * failure says why, and is answered again without asking until
   * {@link RETRY_FAILED_MS} has passed.
   */
  async learn(
    model: string,
    revision = modelRevision(model, undefined),
    commit?: string | null,
  ): Promise<Learned> {
    const key = factsKey(model, revision, commit);
    const known = this.#known.get(key);
    if (known !== undefined) return { facts: known, problem: null };
    const failed = this.#failed.get(key);
    if (failed !== undefined && this.#now() - failed.at < RETRY_FAILED_MS) {
      return { facts: null, problem: failed.problem };
    }
    try {
      const facts = await this.#source.facts(model, commit ?? revision);
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
   * Learns, in the background, the facts of every model revision in `refs`
   * not known yet (opening a store must not wait on a slow hub, and a
   * reconcile pass never waits on it), each once at a time, a failure not
   * before {@link RETRY_FAILED_MS}, one no source serves never again; calls
   * `done` after each that learned something, so placement weighs it.
   * Placement meanwhile refuses nothing for them. Called when the store
   * opens and by every reconcile pass: a commit resolved late, or a
   * re-apply at a branch's new commit, gets its facts without a restart.
   * {@link settled} resolves once what was started is over.
   */
  learnMissing(refs: Iterable<FactsRef>, done: () => void): void {
    for (const r of refs) {
      const revision = r.revision ?? modelRevision(r.model, undefined);
      const key = factsKey(r.model, revision, r.commit);
      if (this.#known.has(key) || this.#busy.has(key) || this.#unserved.has(key)) continue;
      const failed = this.#failed.get(key);
      if (failed !== undefined && this.#now() - failed.at < RETRY_FAILED_MS) continue;
      this.#busy.add(key);
      const run = this.learn(r.model, revision, r.commit).then((learned) => {
        this.#busy.delete(key);
        if (learned.facts !== null) done();
        else if (learned.problem === null) this.#unserved.add(key);
      });
      this.#learning = Promise.all([this.#learning, run]);
    }
  }

  /** Resolves when every background learning started so far is over. */
  async settled(): Promise<void> {
    await this.#learning;
  }
}

/**
 * Learns a deployment's model's facts into `book` (at `commit`, the one its
 * revision resolved to, when known) and checks its profiles
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
  commit: string | null = null,
): Promise<LoadedDeployment> {
  const d = loaded.deployment;
  const learned = await book.learn(d.model, d.revision, commit);
  const { errors, warnings } = modelIssues(d, learned.facts, (c) => classes.memoryBytes?.get(c));
  if (errors.length > 0) throw new DeploymentError("request body", errors);
  const unread = learned.problem === null ? [] : [{
    path: ["model"],
    message: `the model's memory and tensor_parallel were not checked: ${learned.problem}`,
  }];
  return { ...loaded, warnings: [...loaded.warnings, ...warnings, ...unread] };
}

/** `d`'s model's warnings against its profiles with the facts known now (a scale reads nothing). */
export function knownModelWarnings(
  book: ModelFactsBook,
  d: StoredDeployment,
  classes: ClassFacts,
): DeploymentIssue[] {
  const facts = book.known(d.spec.model, d.spec.revision, d.model_commit);
  return modelIssues(d.spec, facts, (c) => classes.memoryBytes?.get(c)).warnings;
}
