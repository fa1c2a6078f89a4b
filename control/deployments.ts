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
import { classFacts, type DeploymentIssue } from "../deployment/validate.ts";
import { checkEngines, type EngineLookup } from "../engines/check_deployment.ts";
import { applyPlacement, indexCluster, place } from "../placement/mod.ts";
import type { PlacementResult } from "../placement/types.ts";
import { ConflictError, InvalidInputError, NotFoundError } from "./errors.ts";
import type { ControlState } from "./state.ts";
import type { StoredDeployment } from "./store.ts";

/** The engines a control plane knows: names for the schema, drivers for the checks. */
export interface EngineCatalog extends EngineLookup {
  /** Every engine name. */
  names(): Set<string>;
}

/** The outcome of an apply. */
export interface ApplyResult {
  /** The deployment as stored. */
  deployment: Deployment;
  /** Problems worth telling that do not block it. */
  warnings: DeploymentIssue[];
  /** True when it did not exist before. */
  created: boolean;
}

/** The deployment service. */
export class DeploymentService {
  readonly #state: ControlState;
  readonly #engines: EngineCatalog;

  /** Creates the service. */
  constructor(state: ControlState, engines: EngineCatalog) {
    this.#state = state;
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
   * Validates a decoded deployment document against the live cluster and its
   * engines; refuses with every field path, storing nothing.
   */
  async check(raw: unknown): Promise<LoadedDeployment> {
    const facts = classFacts(this.#state.inventory.snapshot());
    try {
      const loaded = parseDeployment(raw, "request body", {
        knownEngines: this.#engines.names(),
        classes: facts,
      });
      await checkEngines(loaded.deployment, "request body", this.#engines, facts);
      return loaded;
    } catch (e) {
      if (e instanceof DeploymentError) {
        throw new InvalidInputError("Cannot use deployment", e.issues);
      }
      throw e;
    }
  }

  /**
   * Creates or replaces a deployment. Replicas follow on the next reconcile;
   * a change beyond the replica count rebuilds them on the new spec, and
   * gives failed replicas another chance.
   */
  async apply(raw: unknown): Promise<ApplyResult> {
    const loaded = await this.check(raw);
    const state = this.#state;
    return state.locked(async () => {
      const d = loaded.deployment;
      const clash = [...state.deployments.values()].find((x) =>
        x.name !== d.name && x.spec.served_model_name === d.served_model_name
      );
      if (clash !== undefined) {
        throw new ConflictError(
          `served_model_name ${d.served_model_name} is already served by deployment ${clash.name}`,
          "served_model_name",
        );
      }
      const existing = state.deployments.get(d.name);
      const now = state.now();
      const stored: StoredDeployment = {
        name: d.name,
        spec: d,
        created_at: existing?.created_at ?? now,
        updated_at: now,
      };
      await state.store.putDeployment(stored);
      state.deployments.set(d.name, stored);
      // Replicas on another spec are rebuilt, including those a deletion left
      // behind when this apply came before the reconciler removed them.
      const changed = existing === undefined || !sameExceptReplicas(existing.spec, d);
      if (changed) {
        for (const r of state.replicas.values()) {
          if (r.deployment !== d.name) continue;
          r.failure = null;
          await state.rebuild(r, "deployment changed");
        }
      }
      await state.event(
        existing ? "deployment_updated" : "deployment_created",
        `deployment/${d.name}`,
        `${d.replicas} replicas of ${d.model}`,
      );
      state.kick();
      return { deployment: d, warnings: loaded.warnings, created: existing === undefined };
    });
  }

  /** Changes a deployment's replica count. */
  scale(name: string, replicas: number): Promise<void> {
    const state = this.#state;
    return state.locked(async () => {
      const d = state.deployments.get(name);
      if (d === undefined) throw new NotFoundError(`no deployment ${name}`);
      d.spec.replicas = replicas;
      d.updated_at = state.now();
      await state.store.putDeployment(d);
      await state.event("deployment_scaled", `deployment/${name}`, `${replicas} replicas`);
      state.kick();
    });
  }

  /** Deletes a deployment; its replicas stop and their GPUs are freed. */
  delete(name: string): Promise<void> {
    const state = this.#state;
    return state.locked(async () => {
      if (!state.deployments.has(name)) throw new NotFoundError(`no deployment ${name}`);
      state.deployments.delete(name);
      await state.store.deleteDeployment(name);
      await state.event("deployment_deleted", `deployment/${name}`, "deleted");
      state.kick();
    });
  }

  /**
   * A placement dry run against the live inventory: where each replica of
   * `raw` would go now, with explanations; nothing changes.
   */
  async dryRun(raw: unknown): Promise<PlacementResult[]> {
    const d = (await this.check(raw)).deployment;
    const index = indexCluster(this.#state.inventory.snapshot());
    const out: PlacementResult[] = [];
    for (let i = 0; i < d.replicas; i++) {
      const r = place(index, d, `${d.name}-r${i}`, { detail: "grouped" });
      if (r.status === "placed") applyPlacement(index, d.name, r.shards);
      out.push(r);
    }
    return out;
  }
}

/** True when two versions of a deployment differ only in their replica count. */
function sameExceptReplicas(a: Deployment, b: Deployment): boolean {
  return JSON.stringify({ ...a, replicas: 0 }) === JSON.stringify({ ...b, replicas: 0 });
}
