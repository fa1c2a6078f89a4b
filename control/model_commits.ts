/**
 * A deployment revision's model revision resolved to a commit, once (issue
 * #25 item 1): at apply, when the control plane reaches the hub, else in the
 * background until it does. Every replica of the revision then serves that
 * commit (the launch carries it, control/desired.ts).
 *
 * At apply, the hub's final answers (unknown repo or revision, gated, a
 * token refused) refuse the deployment with the hub's own words; no answer
 * (unreachable, timed out, a 5xx) lets the apply through with a warning, the
 * commit unresolved. Unresolved revisions are asked again with a backoff
 * (5 s doubling to 5 min) by the reconcile step `resolve_models`, each try
 * in the background (a pass never waits on the hub), with a
 * `model_resolve_failed` event per failed try and `model_resolved` once it
 * resolves.
 *
 * @module
 */
import type { CommitSource } from "../models/commit_source.ts";
import { HubError } from "../models/hub_errors.ts";
import { COMMIT_PATTERN } from "../models/hub_protocol.ts";
import type { Deployment } from "../deployment/schema.ts";
import { modelRevision } from "../deployment/model_revision.ts";
import type { DeploymentIssue } from "../deployment/validate.ts";
import { errorMessage } from "../text/error_message.ts";
import { InvalidInputError } from "./errors.ts";
import { revisionCommit, setCurrentCommit } from "./rollout_revisions.ts";
import {
  type ControlStore,
  deploymentRevision,
  type StoredDeployment,
  type StoredReplica,
} from "./store/store.ts";

/**
 * The parts of the control plane's state (control/state.ts) resolution
 * reads and writes; declared here so the state can hold this book without
 * an import circle.
 */
export interface CommitBooks {
  /** Deployments by name. */
  readonly deployments: Map<string, StoredDeployment>;
  /** Replicas by id. */
  readonly replicas: Map<string, StoredReplica>;
  /** Nodes whose desired state may have changed. */
  readonly dirty: Set<string>;
  /** The store. */
  readonly store: Pick<ControlStore, "putDeployment">;
  /** The current time. */
  now(): number;
  /** Runs `fn` alone. */
  locked<T>(fn: () => Promise<T>): Promise<T>;
  /** Records an event. */
  event(kind: string, subject: string, message: string): Promise<void>;
  /** Asks for a reconcile pass soon. */
  kick(): void;
}

/** How long an apply waits on the hub for a commit. */
export const RESOLVE_TIMEOUT_MS = 10_000;
/** The first retry of an unresolved revision, after this long; doubled per try. */
export const RETRY_FIRST_MS = 5_000;
/** The longest wait between retries. */
export const RETRY_MAX_MS = 5 * 60_000;

/** What an apply learned of its model's commit. */
export interface ApplyCommit {
  /** The commit; null for a local path model, or when the hub gave no answer. */
  commit: string | null;
  /** Why it is unresolved (the hub's error), for the apply's warnings; null otherwise. */
  warning: DeploymentIssue | null;
}

/**
 * Resolves `spec`'s model revision for an apply. A full commit resolves to
 * itself when the hub gives no answer (nothing to pin); `source` null (no
 * hub configured) resolves nothing.
 *
 * @throws {InvalidInputError} With the hub's answer, when it is final.
 */
export async function resolveAtApply(
  source: CommitSource | null,
  spec: Deployment,
): Promise<ApplyCommit> {
  const revision = readAt(spec);
  if (revision === undefined) return { commit: null, warning: null };
  const itself = COMMIT_PATTERN.test(revision) ? revision : null;
  if (source === null) return { commit: itself, warning: null };
  try {
    const signal = AbortSignal.timeout(RESOLVE_TIMEOUT_MS);
    return { commit: await source.resolveCommit(spec.model, revision, signal), warning: null };
  } catch (e) {
    if (e instanceof HubError && !e.retryable) {
      throw new InvalidInputError("Cannot use deployment", [{
        path: [spec.revision === "main" ? "model" : "revision"],
        message: e.message,
      }]);
    }
    if (itself !== null) return { commit: itself, warning: null };
    return {
      commit: null,
      warning: {
        path: ["revision"],
        message: `model ${spec.model} revision ${revision} is not resolved to a commit yet: ${
          errorMessage(e)
        }; the control plane retries in the background`,
      },
    };
  }
}

/** One unresolved revision's retries. */
interface Retry {
  /** The deployment revision it is for. */
  revision: number;
  /** Tries so far. */
  tries: number;
  /** When the next try may start. */
  next: number;
  /** Whether a try is under way. */
  busy: boolean;
}

/** The background resolution of revisions an apply left unresolved. */
export class ModelCommits {
  readonly #source: CommitSource | null;
  readonly #retries = new Map<string, Retry>();
  #running: Promise<unknown> = Promise.resolve();

  /** Resolves through `source`; null: no hub configured, nothing is resolved. */
  constructor(source: CommitSource | null) {
    this.#source = source;
  }

  /** The source an apply resolves through. */
  get source(): CommitSource | null {
    return this.#source;
  }

  /**
   * Starts a try for each deployment whose current revision is a hub model
   * with no commit, when its backoff allows; called by the reconcile step
   * `resolve_models`. Returns without waiting for the hub.
   */
  start(state: CommitBooks): void {
    if (this.#source === null) return;
    const now = state.now();
    for (const d of state.deployments.values()) {
      const revision = deploymentRevision(d);
      const key = d.name;
      if (!needsCommit(d)) {
        this.#retries.delete(key);
        continue;
      }
      let retry = this.#retries.get(key);
      if (retry === undefined || retry.revision !== revision) {
        retry = { revision, tries: 0, next: now, busy: false };
        this.#retries.set(key, retry);
      }
      if (retry.busy || now < retry.next) continue;
      retry.busy = true;
      const run = this.#try(state, d.name, d.spec, retry);
      this.#running = Promise.all([this.#running, run]);
    }
  }

  /** Resolves when every try started so far is over (tests). */
  async settled(): Promise<void> {
    await this.#running;
  }

  async #try(state: CommitBooks, name: string, spec: Deployment, retry: Retry): Promise<void> {
    const subject = `deployment/${name}`;
    const revision = readAt(spec)!;
    const what = `model ${spec.model} revision ${revision}`;
    let commit: string | null = null;
    let problem = "";
    try {
      commit = await this.#source!.resolveCommit(
        spec.model,
        revision,
        AbortSignal.timeout(RESOLVE_TIMEOUT_MS),
      );
    } catch (e) {
      problem = errorMessage(e);
    }
    await state.locked(async () => {
      retry.busy = false;
      const d = state.deployments.get(name);
      // Deleted, changed or resolved meanwhile: this answer is for nothing now.
      if (d === undefined || deploymentRevision(d) !== retry.revision || !needsCommit(d)) return;
      if (commit === null) {
        retry.tries++;
        const wait = Math.min(RETRY_FIRST_MS * 2 ** (retry.tries - 1), RETRY_MAX_MS);
        retry.next = state.now() + wait;
        await state.event(
          "model_resolve_failed",
          subject,
          `${what} not resolved (try ${retry.tries}): ${problem}; next try in ${
            Math.round(wait / 1000)
          } s`,
        );
        return;
      }
      this.#retries.delete(name);
      await recordCommit(state, d, commit);
    });
  }
}

/** True when `d`'s current revision reads a hub model at a revision with no commit yet. */
export function needsCommit(d: StoredDeployment): boolean {
  return readAt(d.spec) !== undefined && revisionCommit(d, deploymentRevision(d)) === null;
}

/**
 * Records that `d`'s current revision, resolved late (in the background, or
 * by an apply that changed nothing else), serves `commit`: stored, a
 * `model_resolved` event, and its replicas' desired states recomputed, since
 * their launches now carry the commit. Nothing when it has one already.
 */
export async function recordCommit(
  state: CommitBooks,
  d: StoredDeployment,
  commit: string | null,
): Promise<void> {
  if (commit === null || !needsCommit(d)) return;
  setCurrentCommit(d, commit);
  await state.store.putDeployment(d);
  await announceCommit(state, d);
  for (const r of state.replicas.values()) {
    if (r.deployment !== d.name || r.placement === null) continue;
    for (const s of r.placement.shards) state.dirty.add(s.node);
  }
  state.kick();
}

/** The `model_resolved` event of `d`'s current revision, when it has a commit. */
export async function announceCommit(state: CommitBooks, d: StoredDeployment): Promise<void> {
  const commit = revisionCommit(d, deploymentRevision(d));
  const revision = readAt(d.spec);
  if (commit === null || revision === undefined) return;
  await state.event(
    "model_resolved",
    `deployment/${d.name}`,
    `model ${d.spec.model} revision ${revision} → commit ${commit} ` +
      `(deployment revision ${deploymentRevision(d)})`,
  );
}

/**
 * The revision `spec`'s model is read at: its own, `main` for a hub id that
 * names none (a spec stored before revisions existed), none for a path.
 */
function readAt(spec: Deployment): string | undefined {
  return modelRevision(spec.model, spec.revision);
}
