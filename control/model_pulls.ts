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
 * Pulls live in memory: a control plane that restarts forgets the ones not
 * finished (run `llmgw models pull` again; a rollout asks again by itself).
 *
 * @module
 */
import { isLocalModel, shortCommit } from "../deployment/model_revision.ts";
import type { DesiredModel } from "../protocol/desired_models.ts";
import { revisionName } from "../protocol/model_cache_report.ts";
import type { PullAnswer, PullBody } from "../protocol/model_admin.ts";
import { compareNatural } from "../text/natural_order.ts";
import { ConflictError, InvalidInputError, NotFoundError } from "./errors.ts";
import type { ControlState } from "./state.ts";
export type { ModelPull } from "./model_pull_record.ts";

/** Whether `nodeId`'s last cache report holds `model`@`commit` complete. */
export function nodeHolds(state: ControlState, nodeId: string, model: string, commit: string) {
  return state.modelCaches.get(nodeId)?.revisions.some((r) =>
    r.repo === model && r.commit === commit && r.state === "complete"
  ) ?? false;
}

/**
 * Asks `nodes` to fetch `model`@`commit` (those that hold it are left
 * out); marks their desired states for publishing. Answers who was asked
 * and who holds it already.
 */
export function requestPull(
  state: ControlState,
  model: string,
  commit: string,
  nodes: readonly string[],
): { requested: string[]; held: string[] } {
  const requested: string[] = [];
  const held: string[] = [];
  const key = revisionName(model, commit);
  for (const node of [...new Set(nodes)].sort(compareNatural)) {
    if (nodeHolds(state, node, model, commit)) {
      held.push(node);
      continue;
    }
    let pull = state.modelPulls.get(key);
    if (pull === undefined) state.modelPulls.set(key, pull = { model, commit, nodes: new Set() });
    if (!pull.nodes.has(node)) state.dirty.add(node);
    pull.nodes.add(node);
    requested.push(node);
  }
  return { requested, held };
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
    const { requested, held } = requestPull(
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
 * (`model_pulled`), and a pull no node waits for goes.
 */
export async function settlePulls(state: ControlState, nodeId: string): Promise<void> {
  for (const [key, pull] of state.modelPulls) {
    if (!pull.nodes.has(nodeId) || !nodeHolds(state, nodeId, pull.model, pull.commit)) continue;
    pull.nodes.delete(nodeId);
    state.dirty.add(nodeId);
    await state.event(
      "model_pulled",
      `node/${nodeId}`,
      `holds ${pull.model}@${shortCommit(pull.commit)}, pulled ahead of its replicas`,
    );
    if (pull.nodes.size === 0) state.modelPulls.delete(key);
  }
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
    if (!pull.nodes.has(nodeId)) continue;
    const had = out.get(key);
    out.set(key, {
      model: pull.model,
      commit: pull.commit,
      pinned: had?.pinned ?? false,
      pull: true,
    });
  }
  return [...out.entries()].sort((a, b) => compareNatural(a[0], b[0])).map(([, m]) => m);
}
