/**
 * `llmgw cordon|uncordon|drain NODE…`: operator intent on one node or
 * several (cli/names.ts). `drain` then waits until every node it drained
 * holds no replica: their replacements are ready elsewhere, or they were
 * rebuilt (docs/cli.md), bounded by `--timeout`.
 *
 * @module
 */
import { adminAnswer, type AdminCall } from "./admin_client.ts";
import { type NodeListing, NodeListSchema, NodeSchema } from "../protocol/admin_protocol.ts";
import { eachName, oneOrMany } from "./names.ts";
import { type WaitOptions, waitUntil } from "./wait.ts";

/** Where a node command prints, and how a drain waits. */
export interface NodeCommandOptions {
  /** Print the nodes as JSON at the end instead of lines. */
  json: boolean;
  /** Standard output. */
  out: (text: string) => void;
  /** Standard error. */
  err: (text: string) => void;
  /** How `drain` waits for its replacements. */
  wait: WaitOptions;
}

/** The replicas a node holds, by id. */
function held(n: NodeListing): string[] {
  return [...new Set(n.allocations.map((a) => a.replica_id))].sort();
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** Runs `cordon`, `uncordon` or `drain` over the nodes named; returns the exit code. */
export async function nodeIntentCommand(
  call: AdminCall,
  verb: "cordon" | "uncordon" | "drain",
  names: readonly string[],
  o: NodeCommandOptions,
): Promise<number> {
  const r = await eachName(names, async (name) => {
    const path = `/v1/nodes/${encodeURIComponent(name)}/${verb}`;
    const n = await adminAnswer(call, NodeSchema, "POST", path);
    if (!o.json) o.out(`node ${n.id}: ${n.state}\n`);
    return n;
  }, o.err);
  let failed = r.failed;
  let nodes = r.results;
  if (verb === "drain" && nodes.length > 0) {
    const drained = await waitDrained(call, nodes.map((n) => n.id), o);
    failed += drained.failed;
    nodes = drained.nodes;
  }
  if (o.json && nodes.length > 0) o.out(`${JSON.stringify(oneOrMany(names, nodes), null, 2)}\n`);
  return failed > 0 ? 1 : 0;
}

/**
 * Waits until each node holds no replica. A node whose drain was ended
 * (uncordoned) or that vanished stops the wait for it, as a failure.
 */
async function waitDrained(
  call: AdminCall,
  ids: readonly string[],
  o: NodeCommandOptions,
): Promise<{ nodes: NodeListing[]; failed: number }> {
  const shown = new Map<string, string>();
  const readAll = async () => {
    const { nodes } = await adminAnswer(call, NodeListSchema, "GET", "/v1/nodes");
    const byId = new Map(nodes.map((n) => [n.id, n]));
    return ids.map((id) => ({ id, node: byId.get(id) }));
  };
  const finished = (x: { node?: NodeListing }) =>
    x.node === undefined || x.node.intent !== "draining" || held(x.node).length === 0;
  const result = await waitUntil(readAll, (all) => all.every(finished), o.wait, (all) => {
    for (const { id, node } of all) {
      if (o.json || node === undefined) continue;
      const left = held(node);
      const line = left.length === 0
        ? `node ${id} drained`
        : `node ${id}: draining, ${plural(left.length, "replica")} left (${left.join(", ")})`;
      if (shown.get(id) !== line) o.out(`${line}\n`);
      shown.set(id, line);
    }
  });
  let failed = 0;
  for (const { id, node } of result.value) {
    if (node === undefined) {
      o.err(`llmgw: drain: node ${id} is gone (removed while draining)\n`);
      failed++;
    } else if (node.intent !== "draining") {
      o.err(`llmgw: drain: node ${id} stopped draining: it is ${node.state} now\n`);
      failed++;
    } else if (held(node).length > 0 && result.outcome !== "done") {
      const left = held(node);
      o.err(
        `llmgw: drain: node ${id} still holds ${plural(left.length, "replica")} (${
          left.join(", ")
        }) ${
          result.outcome === "timeout" ? "when --timeout ran out" : "when stopped"
        }; the drain goes on (llmgw describe node ${id})\n`,
      );
      failed++;
    }
  }
  return { nodes: result.value.flatMap((x) => x.node === undefined ? [] : [x.node]), failed };
}
