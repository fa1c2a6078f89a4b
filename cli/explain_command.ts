/**
 * `llmgw explain DEPLOYMENT|REPLICA…`: each replica of a deployment (or the
 * replica named) explained on the live inventory, by the control plane's
 * `GET /v1/replicas/:id/explanation`.
 *
 * @module
 */
import {
  type LiveExplanation,
  LiveExplanationAnswer,
  ReplicaListSchema,
} from "../protocol/admin_protocol.ts";
import { adminAnswer, type AdminCall, AdminError } from "./admin_client.ts";
import { explainLines } from "./admin_views.ts";
import { eachName, exitCode } from "./names.ts";

/**
 * The explanations of a deployment's replicas, or of the one replica named.
 *
 * @throws {AdminError} 404 when no replica or deployment has that name.
 */
export async function explain(call: AdminCall, name: string): Promise<LiveExplanation[]> {
  const { replicas } = await adminAnswer(call, ReplicaListSchema, "GET", "/v1/replicas");
  const ids = replicas.filter((r) => r.deployment === name || r.id === name).map((r) => r.id);
  if (ids.length === 0) {
    throw new AdminError(
      `explain: no replica or deployment named ${name} (llmgw get deployments)`,
      404,
    );
  }
  const out: LiveExplanation[] = [];
  for (const id of ids) {
    const path = `/v1/replicas/${encodeURIComponent(id)}/explanation`;
    out.push(await adminAnswer(call, LiveExplanationAnswer, "GET", path));
  }
  return out;
}

/** `explain NAME…`: each name's replicas explained in turn; returns the exit code (1 when any failed). */
export async function explainCommand(
  call: AdminCall,
  names: readonly string[],
  json: boolean,
  out: (text: string) => void,
  err: (text: string) => void,
): Promise<number> {
  const r = await eachName(names, (name) => explain(call, name), err);
  const all = r.results.flat();
  if (json) out(`${JSON.stringify(all, null, 2)}\n`);
  else if (all.length > 0) out(`${all.map((x) => explainLines(x).join("\n")).join("\n\n")}\n`);
  return exitCode(r);
}
