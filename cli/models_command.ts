/**
 * `llmgw models pull DEPLOYMENT [--nodes a,b]` (issue #25 item 5): fetches
 * a deployment's model revision into the model caches of nodes without
 * holding a GPU (`POST /v1/models/pull`), so the replicas that start there
 * later load at once. Progress shows in `llmgw get models`. `models pulls`
 * lists the pulls under way and lately finished; `models cancel PULL` stops
 * asking nodes for one.
 *
 * @module
 */
import { shortCommit } from "../deployment/model_revision.ts";
import {
  CancelPullAnswerSchema,
  type ModelPullView,
  PullAnswerSchema,
  PullListSchema,
} from "../protocol/model_admin.ts";
import { failureWhy } from "../protocol/model_revision_text.ts";
import { renderTable } from "../text/table.ts";
import { adminAnswer, type AdminCall } from "./admin_client.ts";
import { refuseExtra } from "./names.ts";
import { UsageError } from "./usage_error.ts";

/** "a,b" → ["a", "b"]; an empty name is a usage error. */
export function nodeList(text: string): string[] {
  const names = text.split(",").map((n) => n.trim());
  if (names.some((n) => n === "")) {
    throw new UsageError(`models pull: --nodes has an empty name in "${text}"`, "models");
  }
  return names;
}

/** A `models` command, checked: what to send. */
export type ModelsRequest =
  | { sub: "pull"; body: { deployment: string; nodes?: string[] } }
  | { sub: "pulls" }
  | { sub: "cancel"; body: { pull: string; nodes?: string[] } };

/**
 * Checks `models pull DEPLOYMENT [--nodes …]`, `models pulls` and `models
 * cancel PULL [--nodes …]` before anything is sent.
 *
 * @throws {UsageError} For another subcommand, a missing or extra argument, an empty node name.
 */
export function modelsUsage(
  positionals: readonly string[],
  nodesFlag: string | undefined,
): ModelsRequest {
  const [sub, name] = positionals;
  const nodes = nodesFlag === undefined ? {} : { nodes: nodeList(nodesFlag) };
  switch (sub) {
    case "pull":
      if (name === undefined) throw new UsageError("models pull: DEPLOYMENT is required", "models");
      refuseExtra("models pull", positionals.slice(1), ["one DEPLOYMENT"]);
      return { sub, body: { deployment: name, ...nodes } };
    case "pulls":
      refuseExtra("models pulls", positionals.slice(1), []);
      if (nodesFlag !== undefined) throw new UsageError("models pulls: takes no --nodes", "models");
      return { sub };
    case "cancel":
      if (name === undefined) {
        throw new UsageError(
          "models cancel: PULL is required (org/name@commit, as llmgw models pulls lists it)",
          "models",
        );
      }
      refuseExtra("models cancel", positionals.slice(1), ["one PULL"]);
      return { sub, body: { pull: name, ...nodes } };
    default:
      throw new UsageError(`models: expected pull, pulls or cancel, got "${sub ?? ""}"`, "models");
  }
}

/**
 * Runs `models pull|pulls|cancel`; returns the exit code.
 *
 * @throws {UsageError} As {@link modelsUsage}.
 */
export async function modelsCommand(
  call: AdminCall,
  positionals: readonly string[],
  o: { nodes?: string; json: boolean },
  out: (text: string) => void,
): Promise<number> {
  const request = modelsUsage(positionals, o.nodes);
  if (request.sub === "pulls") {
    const r = await adminAnswer(call, PullListSchema, "GET", "/v1/models/pulls");
    out(o.json ? JSON.stringify(r, null, 2) + "\n" : pullTable(r.pulls));
    return 0;
  }
  if (request.sub === "cancel") {
    const r = await adminAnswer(
      call,
      CancelPullAnswerSchema,
      "POST",
      "/v1/models/pulls/cancel",
      request.body,
    );
    const unchanged = r.unchanged.length === 0 ? "" : `not cancelled: ${r.unchanged.join("; ")}\n`;
    out(
      o.json
        ? JSON.stringify(r, null, 2) + "\n"
        : `${r.id}: ${r.state}\n${nodeStates(r)}\n${unchanged}`,
    );
    return 0;
  }
  const r = await adminAnswer(call, PullAnswerSchema, "POST", "/v1/models/pull", request.body);
  if (o.json) {
    out(JSON.stringify(r, null, 2) + "\n");
    return 0;
  }
  const name = `${r.model}@${shortCommit(r.commit)}`;
  const lines = [
    r.requested.length === 0
      ? `${name}: nothing to fetch`
      : `pulling ${name} onto ${r.requested.join(", ")} (follow with llmgw get models)`,
  ];
  if (r.held.length > 0) {
    lines.push(`${r.held.join(", ")} ${r.held.length === 1 ? "holds" : "hold"} it already`);
  }
  if (r.no_cache.length > 0) {
    lines.push(
      `${
        r.no_cache.join(", ")
      }: no model cache reported (an older agent, or none configured), not asked`,
    );
  }
  out(lines.join("\n") + "\n");
  return 0;
}

/** "n1 done, n2 requested, n3 cancelled (node removed), n4 failed (gated: model … is gated: …)". */
function nodeStates(p: ModelPullView): string {
  return p.nodes.map((n) => {
    const why = n.state === "failed"
      ? failureWhy(n.kind, n.reason)
      : n.state === "cancelled"
      ? n.reason
      : null;
    return `${n.node} ${n.state}${why ? ` (${why})` : ""}`;
  }).join(", ");
}

/**
 * `org/name@` the shortest prefix of the commit, 7 digits at least, that
 * no other pull of the model shares: what `models cancel` takes.
 */
function pullName(p: ModelPullView, pulls: readonly ModelPullView[]): string {
  const others = pulls.filter((q) => q.model === p.model && q.commit !== p.commit);
  let n = shortCommit(p.commit).length;
  while (n < p.commit.length && others.some((q) => q.commit.startsWith(p.commit.slice(0, n)))) n++;
  return `${p.model}@${p.commit.slice(0, n)}`;
}

/** `PULL STATE FINISHED NODES`, one row per pull, as the control plane orders them. */
function pullTable(pulls: readonly ModelPullView[]): string {
  if (pulls.length === 0) return "no pulls under way or lately finished\n";
  const rows = pulls.map((p) => [
    pullName(p, pulls),
    p.state,
    p.finished_at === null ? "-" : new Date(p.finished_at).toISOString(),
    nodeStates(p),
  ]);
  return renderTable(["PULL", "STATE", "FINISHED", "NODES"], rows) + "\n";
}
