/**
 * `llmgw describe node|deployment|replica|model NAME`: everything about one
 * object in one read — state, placement, the explanation on the live
 * inventory, the last failure with its log tail, and recent events.
 *
 * @module
 */
import {
  type DeploymentListing,
  type EventListing,
  EventListSchema,
  type LiveExplanation,
  LiveExplanationAnswer,
  type NodeListing,
  NodeSchema,
  type ReplicaListing,
  ReplicaListSchema,
  type RolloutStatusAnswer,
  RolloutStatusSchema,
  ShardLogsAnswer,
  StoredDeploymentSchema,
} from "../protocol/admin_protocol.ts";
import { adminAnswer, type AdminCall, AdminError } from "./admin_client.ts";
import {
  eventBlock,
  explainLines,
  freeGpus,
  modelRevisionText,
  readyColumn,
  replicaTable,
} from "./admin_views.ts";
import { coldStartLines } from "./cold_start_view.ts";
import { downloadLines } from "./download_view.ts";
import { renderTable } from "../text/table.ts";
import { DEFAULT_ROUTING } from "../deployment/schema.ts";
import { statusText } from "./rollout_command.ts";
import { eachName, exitCode, oneOrMany } from "./names.ts";
import { UsageError } from "./usage_error.ts";
import { type ModelDetail, ModelDetailSchema } from "../protocol/model_admin.ts";
import { modelText } from "./model_view.ts";

/** Recent events shown by describe. */
const EVENTS = 15;

/** What describe found, before it is printed (also the `--json` answer). */
export type Described =
  | { kind: "node"; node: NodeListing; events: EventListing[] }
  | {
    kind: "deployment";
    deployment: DeploymentListing;
    replicas: ReplicaListing[];
    events: EventListing[];
    rollout: RolloutStatusAnswer | null;
  }
  | { kind: "replica"; explanation: LiveExplanation; logs: ShardTail[]; events: EventListing[] }
  | { kind: "model"; model: ModelDetail };

/** The live log tail of a failing shard. */
export interface ShardTail {
  rank: number;
  node: string;
  lines: string[];
  /** Why the agent could not be asked, when it could not. */
  error?: string;
}

async function eventsOf(call: AdminCall, subject: string): Promise<EventListing[]> {
  const { events } = await adminAnswer(
    call,
    EventListSchema,
    "GET",
    `/v1/events?subject=${encodeURIComponent(subject)}&limit=${EVENTS}`,
  );
  return events;
}

/** Gathers what describe prints. */
export async function describe(call: AdminCall, kind: string, name: string): Promise<Described> {
  const id = encodeURIComponent(name);
  switch (kind) {
    case "node":
    case "nodes":
      return {
        kind: "node",
        node: await adminAnswer(call, NodeSchema, "GET", `/v1/nodes/${id}`),
        events: await eventsOf(call, `node/${name}`),
      };
    case "deployment":
    case "deployments": {
      const deployment = await adminAnswer(
        call,
        StoredDeploymentSchema,
        "GET",
        `/v1/deployments/${id}`,
      );
      const { replicas } = await adminAnswer(call, ReplicaListSchema, "GET", "/v1/replicas");
      // The rollout status, where the control plane has one (older ones do not).
      const rollout = await adminAnswer(
        call,
        RolloutStatusSchema,
        "GET",
        `/v1/deployments/${id}/rollout`,
      ).catch((e) => {
        if (e instanceof AdminError && e.status === 404) return null;
        throw e;
      });
      return {
        kind: "deployment",
        deployment,
        replicas: replicas.filter((r) => r.deployment === name),
        events: await eventsOf(call, `deployment/${name}`),
        rollout,
      };
    }
    case "replica":
    case "replicas": {
      const explanation = await adminAnswer(
        call,
        LiveExplanationAnswer,
        "GET",
        `/v1/replicas/${id}/explanation`,
      );
      const failing = explanation.replica.shards.filter((s) =>
        s.state === "failed" || s.last_failure
      );
      const logs: ShardTail[] = [];
      for (const s of failing) {
        try {
          const r = await adminAnswer(
            call,
            ShardLogsAnswer,
            "GET",
            `/v1/replicas/${id}/logs?shard=${s.rank}&lines=20`,
          );
          logs.push({ rank: s.rank, node: s.node, lines: r.lines });
        } catch (e) {
          if (!(e instanceof AdminError)) throw e;
          logs.push({ rank: s.rank, node: s.node, lines: [], error: e.message });
        }
      }
      return {
        kind: "replica",
        explanation,
        logs,
        events: await eventsOf(call, `replica/${name}`),
      };
    }
  }
  if (kind === "model" || kind === "models") {
    // A hub id's two parts are two path segments (org/name), each encoded.
    const path = name.split("/").map(encodeURIComponent).join("/");
    return {
      kind: "model",
      model: await adminAnswer(call, ModelDetailSchema, "GET", `/v1/models/${path}`),
    };
  }
  throw new UsageError(
    `describe: expected node, deployment, replica or model, got "${kind}"`,
    "describe",
  );
}

const field = (name: string, value: string) => `${`${name}:`.padEnd(14)}${value}`;

/** The text describe prints. */
export function describedText(d: Described): string {
  if (d.kind === "model") return modelText(d.model);
  const out: string[] = [];
  if (d.kind === "node") {
    const n = d.node;
    const held = new Map<number, string>();
    for (const a of n.allocations) for (const i of a.gpu_indices) held.set(i, a.replica_id);
    out.push(
      field("Node", n.id),
      field("Hostname", n.hostname || "-"),
      field("Address", n.mgmt_addr),
      field("State", `${n.state}${n.intent && n.intent !== "none" ? ` (${n.intent})` : ""}`),
      field("Agent", n.agent_version || "-"),
      field(
        "Engines",
        Object.entries(n.engine_versions).map(([e, v]) => `${e} ${v}`).join(", ") || "-",
      ),
      field("Last seen", n.last_seen_ms ? new Date(n.last_seen_ms).toISOString() : "-"),
      field(
        "Labels",
        Object.entries(n.labels).map(([k, v]) => `${k}=${v}`).join(", ") || "-",
      ),
      field("GPUs", `${n.gpus.length} (${freeGpus(n)} free)`),
      indent(renderTable(
        ["IDX", "CLASS", "MEMORY MiB", "HEALTH", "HELD BY"],
        n.gpus.map((g) => [
          String(g.index),
          g.class ?? "?",
          g.memory_total_mb === null || g.memory_total_mb === undefined
            ? "-"
            : `${g.memory_used_mb ?? "?"}/${g.memory_total_mb}`,
          g.health.problems.join("; ") || "ok",
          held.get(g.index) ?? "-",
        ]),
      )),
      "Fabrics:",
      n.fabrics.length === 0 ? "  (none)" : indent(renderTable(
        ["FABRIC", "HCAS", "RATE"],
        n.fabrics.map((f) => [
          f.fabric,
          (f.hcas ?? []).join(",") || "-",
          f.rate_gbps === null ? "?" : `${f.rate_gbps} Gb/s`,
        ]),
      )),
    );
  } else if (d.kind === "deployment") {
    const s = d.deployment.spec;
    out.push(
      field("Deployment", d.deployment.name),
      field("Model", s.model),
      field("Hub revision", modelRevisionText(d.deployment)),
      ...(s.pinned === true ? [field("Pinned", "yes: agents keep its files")] : []),
      field("Served as", s.served_model_name),
      field("Ready", `${readyColumn(d.deployment, d.replicas)} replicas`),
      field("Routing", s.routing ?? `${DEFAULT_ROUTING} (default)`),
      ...(d.deployment.revision === undefined
        ? []
        : [field("Revision", String(d.deployment.revision))]),
      field("Updated", new Date(d.deployment.updated_at).toISOString()),
      "Profiles (in priority order):",
      indent(renderTable(
        ["PROFILE", "ENGINE", "GPU CLASS", "TP"],
        s.profiles.map((p) => [
          p.name,
          p.engine,
          p.gpu_class ?? "-",
          String(p.tensor_parallel ?? 1),
        ]),
      )),
    );
    if (d.rollout !== null && d.rollout !== undefined) {
      out.push("Rollout:", indent(statusText(d.rollout).trimEnd()));
    }
    out.push(
      "Replicas:",
      d.replicas.length === 0 ? "  (none)" : indent(replicaTable(d.replicas)),
    );
  } else {
    out.push(...explainLines(d.explanation));
    out.push(...downloadLines(d.explanation.replica.shards));
    out.push(...coldStartLines(d.explanation.replica.shards));
    for (const t of d.logs) {
      out.push(`  rank ${t.rank} on ${t.node}, log now:`);
      if (t.error) out.push(`    (the agent could not be asked: ${t.error})`);
      else out.push(...(t.lines.length === 0 ? ["    (empty)"] : t.lines.map((l) => `    ${l}`)));
    }
  }
  out.push("Events:", ...eventBlock(d.events));
  return out.join("\n") + "\n";
}

function indent(text: string): string {
  return text.split("\n").map((l) => `  ${l}`).join("\n");
}

/**
 * `describe KIND NAME…`: each object described in turn, a blank line
 * between; returns the exit code (1 when any name failed).
 */
export async function describeCommand(
  call: AdminCall,
  kind: string,
  names: readonly string[],
  json: boolean,
  out: (text: string) => void,
  err: (text: string) => void,
): Promise<number> {
  let shown = 0;
  const r = await eachName(names, async (name) => {
    const d = await describe(call, kind, name);
    if (!json) out(`${shown++ > 0 ? "\n" : ""}${describedText(d)}`);
    return d;
  }, err);
  if (json && r.results.length > 0) {
    out(`${JSON.stringify(oneOrMany(names, r.results), null, 2)}\n`);
  }
  return exitCode(r);
}
