/**
 * Deployments: apply, scale, delete and the dry run. `apply` refuses what
 * can never run before anything is stored: the schema, the inventory's class
 * facts, and each profile's engine checks on a representative launch
 * (engines/check_deployment.ts), the same checks `llmgw plan` runs.
 *
 * @module
 */
import { DeploymentError, type LoadedDeployment, parseDeployment } from "../deployment/load.ts";
import { DEFAULT_ROUTING, type Deployment, type RoutingPolicy } from "../deployment/schema.ts";
import { classFacts, type DeploymentIssue, validateDeployment } from "../deployment/validate.ts";
import { checkEngines, type EngineLookup } from "../engines/check_deployment.ts";
import { checkModel, knownModelWarnings } from "./model_facts_book.ts";
import { placementDryRun } from "./placement_dry_run.ts";
import type { PlacementResult } from "../placement/types.ts";
import { ConflictError, InvalidInputError, NotFoundError } from "./errors.ts";
import { type ApplyPlan, planApply } from "./apply_diff.ts";
import { withSettingsOf } from "../deployment/canonical.ts";
import { describeChange } from "../protocol/apply_answer.ts";
import { newUid } from "./identity.ts";
import {
  appendRevision,
  historyOf,
  nextRevision,
  revisionCommit,
  sameRun,
  undoTarget,
} from "./rollout_revisions.ts";
import { announceCommit, recordCommit, resolveAtApply } from "./model_commits.ts";
import { type RolloutStatus, rolloutStatus } from "./rollout_status.ts";
import type { ReplicaBook } from "./replicas.ts";
import type { ControlState } from "./state.ts";
import {
  type DeploymentRevision,
  deploymentRevision,
  replicaRevision,
  type RevisionCause,
  type StoredDeployment,
} from "./store/store.ts";

/** No commit: a check reads the model's facts at its revision. */
const atRevision = (_: Deployment): Promise<string | null> => Promise.resolve(null);

/** The engines a control plane knows: names for the schema, drivers for the checks. */
export interface EngineCatalog extends EngineLookup {
  /** Every engine name. */
  names(): Set<string>;
}

/** The outcome of an apply (or of its dry run: what it would be). */
export interface ApplyResult extends ApplyPlan {
  /** The deployment as applied, with defaults. */
  deployment: Deployment;
  /** Problems worth telling that do not block it. */
  warnings: DeploymentIssue[];
  /** True when it did not exist before. */
  created: boolean;
  /** Its revision after the apply: a new one when the workload changed. */
  revision: number;
  /** True when nothing was stored: the answer says what an apply would do. */
  dry_run: boolean;
}

/** How an apply runs. */
export interface ApplyOptions {
  /** Validate and compare only; store nothing, restart nothing. */
  dryRun?: boolean;
}

/** The deployment service. */
export class DeploymentService {
  readonly #state: ControlState;
  readonly #book: ReplicaBook;
  readonly #engines: EngineCatalog;

  /** Creates the service. */
  constructor(state: ControlState, book: ReplicaBook, engines: EngineCatalog) {
    this.#state = state;
    this.#book = book;
    this.#engines = engines;
  }

  /** Deployments, by name. */
  list(): StoredDeployment[] {
    return structuredClone([...this.#state.deployments.values()]);
  }

  /** Every deployment's served model name, sorted: what gateways answer 503 (not 404) for. */
  servedNames(): string[] {
    return [...new Set([...this.#state.deployments.values()].map((d) => d.spec.served_model_name))]
      .sort();
  }

  /** Each served model's routing policy, for gateways (design §12). */
  routing(): Record<string, RoutingPolicy> {
    const out: Record<string, RoutingPolicy> = {};
    for (const d of this.#state.deployments.values()) {
      out[d.spec.served_model_name] = d.spec.routing ?? DEFAULT_ROUTING;
    }
    return out;
  }

  /** One deployment, or a NotFoundError. */
  get(name: string): StoredDeployment {
    const d = this.#state.deployments.get(name);
    if (d === undefined) throw new NotFoundError(`no deployment ${name}`);
    return structuredClone(d);
  }

  /**
   * Validates a decoded deployment document against the live cluster and its engines; refuses
   * with every field path, storing nothing. Facts are the commit's `commitOf` gives, if any.
   */
  async check(raw: unknown, commitOf = atRevision): Promise<LoadedDeployment> {
    const facts = classFacts(this.#state.inventory.snapshot());
    try {
      const loaded = parseDeployment(raw, "request body", {
        knownEngines: this.#engines.names(),
        classes: facts,
      });
      await checkEngines(loaded.deployment, "request body", this.#engines, facts);
      const commit = await commitOf(loaded.deployment);
      return await checkModel(this.#state.modelFacts, loaded, facts, commit);
    } catch (e) {
      if (e instanceof DeploymentError) {
        throw new InvalidInputError("Cannot use deployment", e.issues);
      }
      throw e;
    }
  }

  /**
   * Creates or replaces a deployment. Replicas follow on the next reconcile.
   * A change to the workload is a new revision, rolled out one replica at a
   * time by the reconciler (design §6.3); a change of settings alone (the
   * count, routing, rollout settings) restarts nothing, and a spec equal to
   * the live one in canonical form (control/apply_diff.ts) stores nothing.
   * A dry run answers the same, checked the same, and changes nothing.
   */
  async apply(raw: unknown, options: ApplyOptions = {}): Promise<ApplyResult> {
    const state = this.#state;
    // The hub is asked outside the lock; the commit first, as the facts are that commit's.
    let resolved = { commit: null as string | null, warning: null as DeploymentIssue | null };
    const loaded = await this.check(raw, async (d) => {
      resolved = await resolveAtApply(state.modelCommits.source, d);
      return resolved.commit;
    });
    const { commit, warning } = resolved;
    return state.locked(async () => {
      const d = loaded.deployment;
      this.#refuseNameClash(d);
      const existing = state.deployments.get(d.name);
      const plan = planApply(
        existing,
        d,
        [...state.replicas.values()].filter((r) => r.deployment === d.name),
        commit,
      );
      const answer = (revision: number, dryRun: boolean): ApplyResult => ({
        deployment: d,
        warnings: warning === null ? loaded.warnings : [...loaded.warnings, warning],
        created: existing === undefined,
        revision,
        dry_run: dryRun,
        ...plan,
      });
      if (options.dryRun === true) {
        if (existing === undefined) return answer(1, true);
        const rolls = plan.result === "updated";
        return answer(rolls ? nextRevision(existing) : deploymentRevision(existing), true);
      }
      // GitOps loops re-apply constantly: an unchanged spec is a no-op (bar a late commit).
      if (plan.result === "unchanged") {
        await recordCommit(state, existing!, commit);
        return answer(deploymentRevision(existing!), false);
      }
      const now = state.now();
      if (existing === undefined) {
        const stored: StoredDeployment = {
          name: d.name,
          spec: d,
          created_at: now,
          updated_at: now,
          revision: 1,
          history: [{
            revision: 1,
            spec: d,
            applied_at: now,
            cause: "apply",
            from_revision: null,
            outcome: "complete",
            reason: null,
            model_commit: commit,
          }],
          rollout: null,
          uid: newUid(),
          model_commit: commit,
        };
        await state.store.putDeployment(stored);
        state.deployments.set(d.name, stored);
        // Replicas a deletion left behind, when this apply came before the
        // reconciler removed them, are rebuilt on the new deployment.
        for (const r of state.replicas.values()) {
          if (r.deployment !== d.name) continue;
          // A replica of the new incarnation now, with its own history.
          await this.#book.rebuild(r, "deployment changed", {
            uid: newUid(),
            failure: null,
            revision: 1,
          });
        }
        await state.event("deployment_created", `deployment/${d.name}`, describe(d));
        await announceCommit(state, stored);
      } else if (plan.result !== "updated") {
        existing.spec = d;
        existing.updated_at = now;
        await state.store.putDeployment(existing);
        await recordCommit(state, existing, commit);
        await state.event(
          plan.result === "scaled" ? "deployment_scaled" : "deployment_updated",
          `deployment/${d.name}`,
          `${plan.changes.map(describeChange).join("; ")}; nothing restarts`,
        );
      } else {
        await state.event(
          "deployment_updated",
          `deployment/${d.name}`,
          plan.changes.map(describeChange).join("; "),
        );
        await this.#newRevision(existing, d, "apply", null, commit);
        await announceCommit(state, existing);
      }
      state.kick();
      return answer(deploymentRevision(state.deployments.get(d.name)!), false);
    });
  }

  /**
   * `rollout undo`: a new revision with an older revision's spec (the
   * newest that runs something else, unless `toRevision` names one), at
   * today's replica count, rolled out as any change (design §6.3).
   */
  undo(name: string, toRevision?: number): Promise<StoredDeployment> {
    const state = this.#state;
    return state.locked(async () => {
      const d = state.deployments.get(name);
      if (d === undefined) throw new NotFoundError(`no deployment ${name}`);
      const current = deploymentRevision(d);
      const history = historyOf(d);
      const target = toRevision === undefined
        ? undoTarget(d)
        : history.find((h) => h.revision === toRevision);
      if (target === undefined) {
        if (toRevision !== undefined) {
          throw new NotFoundError(
            `deployment ${name} has no revision ${toRevision} in its history ` +
              `(it has ${history.map((h) => h.revision).join(", ")})`,
            "unknown_revision",
          );
        }
        throw new ConflictError(
          `deployment ${name} has no earlier revision to undo to: its history holds only ` +
            `revision ${current}'s spec`,
        );
      }
      if (target.revision === current) {
        throw new ConflictError(
          `deployment ${name} is at revision ${current} already; name an older one`,
          "to_revision",
        );
      }
      if (sameRun(d, target.revision, current)) {
        throw new ConflictError(
          `revision ${target.revision} of ${name} runs what revision ${current} runs; ` +
            "nothing to undo",
          "to_revision",
        );
      }
      const spec = withSettingsOf(target.spec, d.spec);
      this.#refuseNameClash(spec);
      await this.#newRevision(d, spec, "undo", target.revision, revisionCommit(d, target.revision));
      state.kick();
      return structuredClone(d);
    });
  }

  /** The deployment's rollout status, or a NotFoundError. */
  rolloutStatus(name: string): RolloutStatus {
    return rolloutStatus(this.#state, name);
  }

  /** The deployment's revisions, oldest first, or a NotFoundError. */
  revisions(name: string): DeploymentRevision[] {
    const d = this.#state.deployments.get(name);
    if (d === undefined) throw new NotFoundError(`no deployment ${name}`);
    return structuredClone(historyOf(d));
  }

  /** Refuses a served model name another deployment serves. */
  #refuseNameClash(d: Deployment): void {
    const clash = [...this.#state.deployments.values()].find((x) =>
      x.name !== d.name && x.spec.served_model_name === d.served_model_name
    );
    if (clash !== undefined) {
      throw new ConflictError(
        `served_model_name ${d.served_model_name} is already served by deployment ${clash.name}`,
        "served_model_name",
      );
    }
  }

  /**
   * Makes `spec` the next revision of `d` and starts its rollout. A rollout
   * under way is superseded, and the revision it would have gone back to
   * stays the one to go back to: the last one known good.
   */
  async #newRevision(
    d: StoredDeployment,
    spec: Deployment,
    cause: RevisionCause,
    from: number | null,
    commit: string | null,
  ): Promise<void> {
    const state = this.#state;
    const now = state.now();
    const before = deploymentRevision(d);
    const revision = nextRevision(d);
    const fallback = d.rollout?.fallback ?? before;
    const replicas = [...state.replicas.values()].filter((r) => r.deployment === d.name);
    const keep = new Set([...replicas.map(replicaRevision), fallback]);
    d.history = appendRevision(d, { revision, spec, at: now, cause, from, commit }, keep);
    d.model_commit = commit;
    d.spec = spec;
    d.revision = revision;
    d.updated_at = now;
    d.rollout = {
      target: revision,
      fallback,
      started_at: now,
      progress_at: now,
      steps: 0,
      step: null,
    };
    await state.store.putDeployment(d);
    const why = cause === "undo" ? `undo to revision ${from}'s spec` : "a changed spec";
    await state.event(
      "rollout_started",
      `deployment/${d.name}`,
      `revision ${revision} (${why}): replacing ${replicas.length} replicas of revision ` +
        `${before} one at a time; back to revision ${fallback} if it fails`,
    );
  }

  /**
   * Changes a deployment's replica count; answers the warnings an apply of
   * the scaled spec would give (more replicas than the fleet's GPUs hold).
   */
  scale(name: string, replicas: number): Promise<DeploymentIssue[]> {
    const state = this.#state;
    return state.locked(async () => {
      const d = state.deployments.get(name);
      if (d === undefined) throw new NotFoundError(`no deployment ${name}`);
      // The count is not part of a revision: nothing restarts (design §6.3).
      d.spec.replicas = replicas;
      d.updated_at = state.now();
      await state.store.putDeployment(d);
      await state.event("deployment_scaled", `deployment/${name}`, `${replicas} replicas`);
      state.kick();
      const classes = classFacts(state.inventory.snapshot());
      return [
        ...validateDeployment(d.spec, { knownEngines: this.#engines.names(), classes }).warnings,
        ...knownModelWarnings(state.modelFacts, d, classes),
      ];
    });
  }

  /** Deletes a deployment; its replicas stop and their GPUs are freed. */
  delete(name: string): Promise<void> {
    return this.#state.locked(async () => {
      const state = this.#state;
      const d = state.deployments.get(name);
      if (d === undefined) throw new NotFoundError(`no deployment ${name}`);
      state.deployments.delete(name);
      await state.store.deleteDeployment(name);
      await state.event("deployment_deleted", `deployment/${name}`, "deleted", d.uid ?? "");
      state.kick();
    });
  }

  /** A placement dry run on the live inventory: where each replica of `raw` would go now, why. */
  async dryRun(raw: unknown): Promise<PlacementResult[]> {
    return placementDryRun(this.#state, (await this.check(raw)).deployment);
  }
}

/** An event's words for a deployment. */
function describe(d: Deployment): string {
  return `${d.replicas} replicas of ${d.model}`;
}
