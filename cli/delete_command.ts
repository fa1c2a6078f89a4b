/**
 * `llmgw delete [deployment] NAME…` and `llmgw delete node NODE…`: stop
 * deployments and free their GPUs, or remove nodes that hold no replica
 * and are lost, cordoned or draining (control/node_removal.ts). Several
 * names as kubectl takes them (cli/names.ts).
 *
 * @module
 */
import { adminAnswer, type AdminCall } from "./admin_client.ts";
import { DeletedAnswer, NodeSchema, StoredDeploymentSchema } from "../protocol/admin_protocol.ts";
import { eachName, exitCode, oneOrMany } from "./names.ts";
import { UsageError } from "./usage_error.ts";

/** What `delete` acts on, and the names. */
export interface DeleteTarget {
  /** Deployments or nodes. */
  kind: "deployment" | "node";
  /** The names, at least one. */
  names: string[];
}

const KINDS: Readonly<Record<string, DeleteTarget["kind"]>> = {
  deployment: "deployment",
  deployments: "deployment",
  node: "node",
  nodes: "node",
};

/**
 * Reads `delete`'s arguments: `[deployment] NAME…` or `node NODE…`. A
 * deployment named like a kind is deleted with `delete deployment NAME`.
 *
 * @throws {UsageError} When no name follows the kind.
 */
export function deleteTarget(positionals: readonly string[]): DeleteTarget {
  const [first, ...rest] = positionals;
  const kind = KINDS[first];
  if (kind === undefined) return { kind: "deployment", names: [...positionals] };
  if (rest.length === 0) {
    throw new UsageError(
      `delete ${first}: ${kind === "node" ? "NODE" : "DEPLOYMENT"} is required` +
        (kind === "deployment" ? "" : ", e.g. llmgw delete node gpu-07"),
      "delete",
    );
  }
  return { kind, names: rest };
}

/** Runs `delete`; returns the exit code (1 when any name failed). */
export async function deleteCommand(
  call: AdminCall,
  target: DeleteTarget,
  json: boolean,
  out: (text: string) => void,
  err: (text: string) => void,
): Promise<number> {
  const r = await eachName(target.names, async (name) => {
    const id = encodeURIComponent(name);
    if (target.kind === "node") {
      const n = await adminAnswer(call, NodeSchema, "DELETE", `/v1/nodes/${id}`);
      if (!json) out(`node ${name} removed\n`);
      return n;
    }
    const d = await adminAnswer(call, StoredDeploymentSchema, "GET", `/v1/deployments/${id}`);
    await adminAnswer(call, DeletedAnswer, "DELETE", `/v1/deployments/${id}`);
    if (!json) out(`deployment ${name} deleted\n`);
    return d;
  }, err);
  if (json && r.results.length > 0) {
    out(`${JSON.stringify(oneOrMany(target.names, r.results), null, 2)}\n`);
  }
  return exitCode(r);
}
