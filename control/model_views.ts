/**
 * Model revisions across the fleet, as `llmgw get models` and `describe
 * model` show them (issue #25 item 5): each revision that a deployment
 * serves or an agent reports in its model cache, with its size, the
 * deployments using it, whether it is pinned, its facts, and each host's
 * copy (complete, downloading with bytes done, or asked to pull it), and
 * the hosts whose pull of it failed for good, with their agents' words
 * (as `llmgw models pulls` lists them, until the pull is pruned or asked
 * again).
 *
 * A revision is named `model@commit`; a deployment whose revision is not
 * resolved yet lists its model with a null commit (and its revision name).
 *
 * @module
 */
import { modelRevision } from "../deployment/model_revision.ts";
import { revisionName } from "../protocol/model_cache_report.ts";
import {
  FETCH_FAILED_KIND,
  type ModelDetail,
  type ModelHostView,
  type ModelRevisionView,
} from "../protocol/model_admin.ts";
import { compareNatural } from "../text/natural_order.ts";
import { NotFoundError } from "./errors.ts";
import type { ControlState } from "./state.ts";

/** A host's copy before its agent reports any of it. */
const NOTHING_HELD = { bytes_done: 0, bytes: null, last_used: null } as const;

/** Every model revision, by model then commit (unresolved ones last of their model). */
export function modelList(state: ControlState): ModelRevisionView[] {
  const views = new Map<string, ModelRevisionView>();
  const view = (model: string, commit: string | null, revision: string | null) => {
    const key = commit === null ? `${model}\0${revision}` : revisionName(model, commit);
    let v = views.get(key);
    if (v === undefined) {
      v = {
        model,
        commit,
        revision,
        bytes: null,
        deployments: [],
        pinned: false,
        hosts: [],
        facts: null,
      };
      views.set(key, v);
    }
    return v;
  };
  for (const d of state.deployments.values()) {
    const revision = modelRevision(d.spec.model, d.spec.revision) ?? null;
    const v = view(d.spec.model, d.model_commit ?? null, revision);
    v.revision ??= revision;
    v.deployments.push(d.name);
    v.pinned ||= d.spec.pinned === true;
    v.facts ??= state.modelFacts.known(d.spec.model, revision ?? undefined, d.model_commit);
  }
  for (const [node, report] of state.modelCaches) {
    if (!state.nodes.has(node)) continue;
    for (const r of report.revisions) {
      const v = view(r.repo, r.commit, null);
      v.pinned ||= r.pinned;
      v.hosts.push({
        node,
        state: r.state,
        bytes_done: r.bytes_done,
        bytes: r.bytes,
        last_used: r.last_used,
      });
    }
  }
  // Each view's hosts by node, built once: a fleet-wide pull keeps a part per node for a day
  // after it finishes, and the dashboard asks for this list every 2 s.
  const byNode = new Map<ModelRevisionView, Map<string, ModelHostView>>();
  const hostsOf = (v: ModelRevisionView) => {
    let hosts = byNode.get(v);
    if (hosts === undefined) {
      hosts = new Map(v.hosts.map((h) => [h.node, h]));
      byNode.set(v, hosts);
    }
    return hosts;
  };
  for (const pull of state.modelPulls.values()) {
    const v = view(pull.model, pull.commit, null);
    for (const part of pull.nodes) {
      // Done and cancelled parts show nothing: the host's own report says what it holds.
      if (part.state !== "requested" && part.state !== "failed") continue;
      if (!state.nodes.has(part.node)) continue;
      const hosts = hostsOf(v);
      const host = hosts.get(part.node);
      if (part.state === "requested") {
        if (host === undefined) {
          const requested: ModelHostView = { node: part.node, ...NOTHING_HELD, state: "requested" };
          v.hosts.push(requested);
          hosts.set(part.node, requested);
        }
        continue;
      }
      // A download under way or a complete copy is newer than the failure; a partial one is
      // what the failed fetch left.
      if (host !== undefined && host.state !== "partial") continue;
      const failure = {
        kind: part.kind ?? FETCH_FAILED_KIND,
        message: part.reason ?? "",
        at: part.finished_at ?? part.requested_at,
      };
      if (host === undefined) {
        const failed: ModelHostView = {
          node: part.node,
          ...NOTHING_HELD,
          state: "failed",
          failure,
        };
        v.hosts.push(failed);
        hosts.set(part.node, failed);
      } else Object.assign(host, { state: "failed", failure });
    }
  }
  for (const v of views.values()) {
    v.deployments.sort(compareNatural);
    v.hosts.sort((a: ModelHostView, b: ModelHostView) => compareNatural(a.node, b.node));
    const reported = v.hosts.filter((h) => h.state === "complete").map((h) => h.bytes ?? 0);
    // Unreported, the revision's files (what a host would hold), else its weights.
    v.bytes = reported.length > 0
      ? Math.max(...reported)
      : v.facts?.download_bytes ?? v.facts?.weight_bytes ?? null;
  }
  return [...views.values()].sort((a, b) =>
    compareNatural(a.model, b.model) ||
    (a.commit === null ? 1 : 0) - (b.commit === null ? 1 : 0) ||
    compareNatural(a.commit ?? a.revision ?? "", b.commit ?? b.revision ?? "")
  );
}

/**
 * One model's revisions.
 *
 * @throws {NotFoundError} When no deployment uses it and no agent holds it.
 */
export function modelDetail(state: ControlState, model: string): ModelDetail {
  const revisions = modelList(state).filter((v) => v.model === model);
  if (revisions.length === 0) {
    throw new NotFoundError(`no model ${model}: no deployment uses it and no agent reports it`);
  }
  return { model, revisions };
}
