/**
 * `llmgw models pull DEPLOYMENT [--nodes a,b]` (issue #25 item 5): fetches
 * a deployment's model revision into the model caches of nodes without
 * holding a GPU (`POST /v1/models/pull`), so the replicas that start there
 * later load at once. Progress shows in `llmgw get models`.
 *
 * @module
 */
import { shortCommit } from "../deployment/model_revision.ts";
import { PullAnswerSchema } from "../protocol/model_admin.ts";
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

/**
 * Checks `models pull DEPLOYMENT [--nodes …]` before anything is sent.
 *
 * @throws {UsageError} For another subcommand, a missing or extra argument, an empty node name.
 */
export function modelsUsage(
  positionals: readonly string[],
  nodesFlag: string | undefined,
): { deployment: string; nodes?: string[] } {
  const [sub, deployment] = positionals;
  if (sub !== "pull") {
    throw new UsageError(`models: expected pull, got "${sub ?? ""}"`, "models");
  }
  if (deployment === undefined) {
    throw new UsageError("models pull: DEPLOYMENT is required", "models");
  }
  refuseExtra("models pull", positionals.slice(1), ["one DEPLOYMENT"]);
  return nodesFlag === undefined ? { deployment } : { deployment, nodes: nodeList(nodesFlag) };
}

/**
 * Runs `models pull DEPLOYMENT`; returns the exit code.
 *
 * @throws {UsageError} As {@link modelsUsage}.
 */
export async function modelsCommand(
  call: AdminCall,
  positionals: readonly string[],
  o: { nodes?: string; json: boolean },
  out: (text: string) => void,
): Promise<number> {
  const body = modelsUsage(positionals, o.nodes);
  const r = await adminAnswer(call, PullAnswerSchema, "POST", "/v1/models/pull", body);
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
