/**
 * Model revisions fetched onto nodes without holding GPUs (issue #25 item
 * 5): `llmgw models pull DEPLOYMENT [--nodes …]` and a rollout's pre-pull
 * (control/rollout_prepull.ts) ask nodes to fetch a revision into their
 * model caches; each node's desired state then names it (`models`, with
 * `pull: true`), its agent fetches it with the shard download's code path,
 * and once its heartbeat reports it held the node is done (`model_pulled`).
 * Every pinned deployment's revision is named to every node too
 * (`pinned: true`), so no agent evicts it.
 *
 * Pulls are stored (control/model_pull_record.ts), so a restarted or
 * failed-over control plane keeps asking for the ones not done; every
 * change is written to the store first, then to memory and the desired
 * states, so a failed write changes nothing. A node removed, or that an
 * operator cancels, is `cancelled` (control/model_pull_cancel.ts). A node
 * whose agent reports the pull failed for good (the heartbeat's
 * `pulls_failed`) is `failed` with the agent's words (`model_pull_failed`,
 * once) and no longer asked; once it reports the revision held anyway (a
 * replica fetched it) it is `done`. Each request of a node has its own
 * `requested_at`, sent in the desired state and named by the agent's
 * failure, so a failure of an earlier request never fails a later one. An operator's pull asks a failed or
 * cancelled node again; a rollout's pre-pull only when it failed or was
 * cancelled before the rollout began (control/rollout_prepull.ts).
 * Finished pulls stay listed (`GET /v1/models/pulls`) for a while, and the
 * parts of removed nodes are cancelled, by the sweep
 * (control/model_pull_sweep.ts).
 *
 * @module
 */
import { isLocalModel, shortCommit } from "../deployment/model_revision.ts";
import type { DesiredModel } from "../protocol/desired_models.ts";
import { type PullFailureReport, revisionName } from "../protocol/model_cache_report.ts";
import type { ModelPullView, PullAnswer, PullBody } from "../protocol/model_admin.ts";
import { compareNatural } from "../text/natural_order.ts";
import { ConflictError, InvalidInputError, NotFoundError } from "./errors.ts";
import type { ModelPull, PullNode } from "./model_pull_record.ts";
import type { ControlState } from "./state.ts";
export type { ModelPull } from "./model_pull_record.ts";

/** Whether `nodeId`'s last cache report holds `model`@`commit` complete. */
export function nodeHolds(state: ControlState, nodeId: string, model: string, commit: string) {
  return state.modelCaches.get(nodeId)?.revisions.some((r) =>
    r.repo === model && r.commit === commit && r.state === "complete"
  ) ?? false;
}

/** The nodes of `pull` still asked to fetch it, in natural order. */
export function waitingNodes(pull: ModelPull): string[] {
  return pull.nodes.filter((n) => n.state === "requested").map((n) => n.node);
}

/**
 * Asks `nodes` to fetch `model`@`commit` (those that hold it are left
 * out); stores the pull, then marks the desired states of the nodes newly
 * asked for publishing. Answers who was asked and who holds it already.
 * A node whose part `failed` or was cancelled is asked again (an
 * operator's pull); `givenUpSince` leaves out those that failed, or that
 * an operator cancelled, at or after it (a rollout's pre-pull does not ask
 * again what failed or was cancelled during the rollout).
 */
export async function requestPull(
  state: ControlState,
  model: string,
  commit: string,
  nodes: readonly string[],
  givenUpSince = Infinity,
): Promise<{ requested: string[]; held: string[] }> {
  const requested: string[] = [];
  const held: string[] = [];
  const id = revisionName(model, commit);
  const now = state.now();
  const asked: string[] = [];
  const stored = state.modelPulls.get(id);
  // Changed on a copy: memory follows the store only once the write went through.
  const pull: ModelPull = stored === undefined
    ? { id, model, commit, nodes: [], created_at: now, updated_at: now, finished_at: null }
    : structuredClone(stored);
  for (const node of [...new Set(nodes)].sort(compareNatural)) {
    if (nodeHolds(state, node, model, commit)) {
      held.push(node);
      continue;
    }
    const entry = pull.nodes.find((n) => n.node === node);
    if (entry !== undefined && givenUp(entry, givenUpSince)) continue;
    requested.push(node);
    if (entry?.state === "requested") continue;
    // Also the request's id (the agent names it in a failure): one more when the clock has not moved.
    const requestedAt = Math.max(now, (entry?.requested_at ?? -Infinity) + 1);
    const part = {
      node,
      state: "requested" as const,
      requested_at: requestedAt,
      finished_at: null,
    };
    if (entry === undefined) pull.nodes.push({ ...part, reason: null });
    else {
      delete entry.kind;
      Object.assign(entry, part, { reason: null });
    }
    asked.push(node);
  }
  if (asked.length > 0) {
    pull.nodes.sort((a, b) => compareNatural(a.node, b.node));
    pull.updated_at = now;
    pull.finished_at = null;
    await storePull(state, pull, asked);
  }
  return { requested, held };
}

/** The reason of a node's part that an operator cancelled (`llmgw models cancel`). */
export const OPERATOR_CANCEL_REASON = "cancelled by an operator";

/** Whether `entry` failed, or an operator cancelled it, at or after `since`. */
export function givenUp(entry: PullNode, since: number): boolean {
  const finalState = entry.state === "failed" ||
    (entry.state === "cancelled" && entry.reason === OPERATOR_CANCEL_REASON);
  return finalState && (entry.finished_at ?? 0) >= since;
}

/**
 * Writes `pull` (a changed copy) to the store, then makes it the state's
 * and marks `nodes`' desired states for publishing: a failed write leaves
 * memory as the store has it.
 */
export async function storePull(
  state: ControlState,
  pull: ModelPull,
  nodes: readonly string[],
): Promise<void> {
  await state.store.putModelPull(pull);
  state.modelPulls.set(pull.id, pull);
  for (const n of nodes) state.dirty.add(n);
}

/**
 * `POST /v1/models/pull`: the deployment's current model revision onto
 * the nodes named, or every ready node with a GPU class of its profiles.
 *
 * @throws {NotFoundError} For an unknown deployment or node.
 * @throws {InvalidInputError} For a local model (used in place: nothing to fetch).
 * @throws {ConflictError} While the revision is not resolved to a commit.
 */
export function pullDeploymentModel(state: ControlState, body: PullBody): Promise<PullAnswer> {
  return state.locked(async () => {
    const d = state.deployments.get(body.deployment);
    if (d === undefined) throw new NotFoundError(`no deployment ${body.deployment}`);
    const model = d.spec.model;
    if (isLocalModel(model)) {
      throw new InvalidInputError("Cannot pull", [{
        path: ["deployment"],
        message:
          `deployment ${d.name}'s model ${model} is a local path, used in place on each host: nothing to fetch`,
      }]);
    }
    const commit = d.model_commit ?? null;
    if (commit === null) {
      throw new ConflictError(
        `Cannot pull ${model} for deployment ${d.name}: its revision ${
          d.spec.revision ?? "main"
        } is not resolved to a commit yet (the control plane retries; see llmgw get deployments)`,
      );
    }
    let nodes = body.nodes;
    if (nodes === undefined) {
      const classes = new Set(d.spec.profiles.map((p) => p.gpu_class));
      nodes = state.inventory.snapshot()
        .filter((n) => n.state === "ready" && n.gpus.some((g) => classes.has(g.class ?? "")))
        .map((n) => n.id);
    }
    for (const [i, n] of nodes.entries()) {
      if (!state.nodes.has(n)) throw new NotFoundError(`no node ${n} (nodes[${i}])`);
    }
    // An agent that reports no cache would never say it holds the revision: not asked.
    const noCache = nodes.filter((n) => !state.modelCaches.has(n)).sort(compareNatural);
    const { requested, held } = await requestPull(
      state,
      model,
      commit,
      nodes.filter((n) => state.modelCaches.has(n)),
    );
    if (requested.length > 0) {
      await state.event(
        "model_pull",
        `deployment/${d.name}`,
        `fetching ${model}@${shortCommit(commit)} onto ${requested.join(", ")}` +
          (held.length > 0 ? `; ${held.join(", ")} already hold it` : ""),
      );
      state.kick();
    }
    return { model, commit, requested, held, no_cache: noCache };
  });
}

/**
 * A node's cache report came: the pulls it now holds are done for it
 * (`model_pulled`), those asked of it and those that failed there alike (a
 * replica fetched it since); a pull no node waits for is finished, and
 * kept listed for a while. Answers whether any part was settled.
 */
export async function settlePulls(state: ControlState, nodeId: string): Promise<boolean> {
  const now = state.now();
  let settled = false;
  for (const stored of [...state.modelPulls.values()]) {
    const at = stored.nodes.findIndex((n) =>
      n.node === nodeId && (n.state === "requested" || n.state === "failed")
    );
    if (at < 0 || !nodeHolds(state, nodeId, stored.model, stored.commit)) continue;
    const pull = structuredClone(stored);
    const entry = pull.nodes[at];
    const failed = entry.state === "failed";
    delete entry.kind;
    Object.assign(entry, { state: "done", finished_at: now, reason: null });
    settled = true;
    finish(pull, now);
    await storePull(state, pull, [nodeId]);
    await state.event(
      "model_pulled",
      `node/${nodeId}`,
      `holds ${pull.model}@${shortCommit(pull.commit)}, ` +
        (failed ? "fetched since its pull failed (by a replica)" : "pulled ahead of its replicas"),
    );
  }
  return settled;
}

/**
 * A node's heartbeat named pulls that failed for good on its agent: each
 * one still asked of it is `failed`, with the agent's kind and words,
 * stored, and a `model_pull_failed` event; the node is no longer asked
 * (its desired state drops the pull). A failure of a pull not asked of it
 * (already failed, done, cancelled; a report crossing the desired state
 * that dropped it), or of an earlier request than the one asked now (its
 * `requested_at` differs: an operator pulled again before the agent saw
 * the pull dropped), changes nothing; an older agent's, naming no
 * request, applies to the one asked now.
 */
export async function failPulls(
  state: ControlState,
  nodeId: string,
  failures: readonly PullFailureReport[],
): Promise<void> {
  const now = state.now();
  for (const f of failures) {
    const stored = state.modelPulls.get(revisionName(f.repo, f.commit));
    const at = stored?.nodes.findIndex((n) =>
      n.node === nodeId && n.state === "requested" &&
      (f.requested_at === undefined || f.requested_at === n.requested_at)
    ) ?? -1;
    if (stored === undefined || at < 0) continue;
    const pull = structuredClone(stored);
    Object.assign(pull.nodes[at], {
      state: "failed",
      finished_at: now,
      reason: f.message,
      kind: f.kind,
    });
    finish(pull, now);
    await storePull(state, pull, [nodeId]);
    await state.event(
      "model_pull_failed",
      `node/${nodeId}`,
      `cannot pull ${pull.model}@${shortCommit(pull.commit)} (${f.kind}): ${f.message}; ` +
        "not asked again until pulled again (llmgw models pull)",
    );
  }
}

/** Reads the stored pulls into the state (a control plane opening its store). */
export async function restorePulls(state: ControlState): Promise<void> {
  for (const p of await state.store.listModelPulls()) state.modelPulls.set(p.id, p);
}

/** `GET /v1/models/pulls`: every pull with where it stands, as {@link pullList} orders them. */
export function pullViews(state: ControlState): ModelPullView[] {
  return pullList(state).map((p) => ({
    ...structuredClone(p),
    state: p.finished_at === null
      ? "pulling"
      : p.nodes.some((n) => n.state === "done")
      ? "done"
      : p.nodes.some((n) => n.state === "failed")
      ? "failed"
      : "cancelled",
  }));
}

/** Every pull, the unfinished first (by id), then the finished, newest first. */
export function pullList(state: ControlState): ModelPull[] {
  return [...state.modelPulls.values()].sort((a, b) =>
    (a.finished_at === null ? 0 : 1) - (b.finished_at === null ? 0 : 1) ||
    (b.finished_at ?? 0) - (a.finished_at ?? 0) || compareNatural(a.id, b.id)
  );
}

/** Marks a pull changed at `now`, and finished once no node is requested. */
export function finish(pull: ModelPull, now: number): void {
  pull.updated_at = now;
  if (waitingNodes(pull).length === 0) pull.finished_at ??= now;
}

/** Every pinned deployment's current revision (a hub model with a known commit). */
export function pinnedModels(state: ControlState): { model: string; commit: string }[] {
  const out = new Map<string, { model: string; commit: string }>();
  for (const d of state.deployments.values()) {
    const commit = d.model_commit ?? null;
    if (d.spec.pinned !== true || commit === null || isLocalModel(d.spec.model)) continue;
    out.set(revisionName(d.spec.model, commit), { model: d.spec.model, commit });
  }
  return [...out.values()].sort((a, b) =>
    compareNatural(revisionName(a.model, a.commit), revisionName(b.model, b.commit))
  );
}

/** The models of `nodeId`'s desired state: every pinned revision, and the pulls it is asked for. */
export function desiredModels(state: ControlState, nodeId: string): DesiredModel[] {
  const out = new Map<string, DesiredModel>();
  for (const { model, commit } of pinnedModels(state)) {
    out.set(revisionName(model, commit), { model, commit, pinned: true, pull: false });
  }
  for (const [key, pull] of state.modelPulls) {
    const part = pull.nodes.find((n) => n.node === nodeId && n.state === "requested");
    if (part === undefined) continue;
    const had = out.get(key);
    out.set(key, {
      model: pull.model,
      commit: pull.commit,
      pinned: had?.pinned ?? false,
      pull: true,
      requested_at: part.requested_at,
    });
  }
  return [...out.entries()].sort((a, b) => compareNatural(a[0], b[0])).map(([, m]) => m);
}
