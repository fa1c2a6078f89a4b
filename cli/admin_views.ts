/**
 * What the admin commands print: tables and blocks built from the admin
 * API's JSON, as pure functions (tested without a control plane).
 *
 * @module
 */
import { downloadSummary } from "../protocol/shard_download.ts";
import { DEFAULT_ROUTING } from "../deployment/schema.ts";
import { shortCommit } from "../deployment/model_revision.ts";
import { explanationLines } from "../placement/place.ts";
import type {
  DeploymentListing,
  EventListing,
  LiveExplanation,
  NodeListing,
  ReplicaListing,
  ShardListing,
} from "../protocol/admin_protocol.ts";
import { cutAtWord, renderTable } from "../text/table.ts";

/** GPUs free on a node: healthy and not held. */
export function freeGpus(n: NodeListing): number {
  const held = new Set(n.allocations.flatMap((a) => a.gpu_indices));
  return n.gpus.filter((g) => g.health.problems.length === 0 && !held.has(g.index)).length;
}

/** Nodes as a table; `wide` adds agent, engines and what they hold. */
export function nodeTable(nodes: readonly NodeListing[], wide = false): string {
  const header = ["NODE", "STATE", "GPUS", "FREE", "CLASSES", "FABRICS", "ADDRESS"];
  if (wide) header.push("AGENT", "ENGINES", "REPLICAS");
  return renderTable(
    header,
    nodes.map((n) => {
      const row = [
        n.id,
        n.state,
        String(n.gpus.length),
        String(freeGpus(n)),
        [...new Set(n.gpus.map((g) => g.class ?? "?"))].join(",") || "-",
        n.fabrics.map((f) => f.fabric).join(",") || "-",
        n.mgmt_addr,
      ];
      if (wide) {
        row.push(
          n.agent_version || "-",
          Object.entries(n.engine_versions).map(([e, v]) => `${e} ${v}`).join(",") || "-",
          [...new Set(n.allocations.map((a) => a.replica_id))].join(",") || "-",
        );
      }
      return row;
    }),
  );
}

/** Ready replicas of a deployment / desired, e.g. `2/3`. */
export function readyColumn(d: DeploymentListing, replicas: readonly ReplicaListing[]): string {
  const ready = replicas.filter((r) => r.deployment === d.name && r.state === "ready").length;
  return `${ready}/${d.spec.replicas}`;
}

/** Deployments as a table with READY; `wide` adds routing, profiles and revision. */
export function deploymentTable(
  deployments: readonly DeploymentListing[],
  replicas: readonly ReplicaListing[],
  wide = false,
): string {
  const header = ["DEPLOYMENT", "READY", "MODEL", "MODEL REVISION", "SERVED AS"];
  if (wide) header.push("ROUTING", "PROFILES", "REVISION", "UPDATED");
  return renderTable(
    header,
    deployments.map((d) => {
      const row = [
        d.name,
        readyColumn(d, replicas),
        d.spec.model,
        modelRevisionCell(d),
        d.spec.served_model_name,
      ];
      if (wide) {
        row.push(
          d.spec.routing ?? `${DEFAULT_ROUTING} (default)`,
          d.spec.profiles.map((p) => p.name).join(","),
          d.revision === undefined ? "-" : String(d.revision),
          new Date(d.updated_at).toISOString(),
        );
      }
      return row;
    }),
  );
}

/**
 * A deployment's model revision and the commit it resolved to, short:
 * `main@1a2b3c4`; `main@?` while unresolved; `-` for a local path model.
 */
export function modelRevisionCell(d: DeploymentListing): string {
  if (d.spec.revision === undefined) return "-";
  const commit = d.model_commit ?? null;
  return `${d.spec.revision}@${commit === null ? "?" : shortCommit(commit)}`;
}

/** The model revision and its full commit, as `describe` shows them. */
export function modelRevisionText(d: DeploymentListing): string {
  if (d.spec.revision === undefined) return "- (a local path: used as it is)";
  const commit = d.model_commit ?? null;
  return `${d.spec.revision} → ${commit ?? "not resolved yet (the control plane retries)"}`;
}

function progressCell(s: ShardListing): string {
  if (s.download !== null) return downloadSummary(s.download);
  return s.progress === null || s.progress.percent === null ? "-" : `${s.progress.percent}%`;
}

/** A shard's state as listed: `crash_loop 3/5` while it crash-loops. */
function shardStateCell(s: ShardListing): string {
  const c = s.crash_loop;
  return c === null ? s.state : `crash_loop ${c.failures}/${c.limit}`;
}

/** Replicas as a table: one line per shard; `wide` adds the port and shard id. */
export function replicaTable(replicas: readonly ReplicaListing[], wide = false): string {
  const header = [
    "REPLICA",
    "STATE",
    "PROFILE",
    "RANK",
    "NODE",
    "GPUS",
    "SHARD",
    "RESTARTS",
    "PROGRESS",
  ];
  if (wide) header.push("PORT", "SHARD ID");
  return renderTable(
    header,
    replicas.flatMap((r) => {
      if (r.shards.length === 0) {
        const why = (r.state === "failed" ? r.failure?.reason : undefined) ??
          r.explanation?.summary ?? "-";
        const row = [r.id, r.state, r.profile ?? "-", "-", "-", "-", "-", "-", cutAtWord(why, 80)];
        if (wide) row.push("-", "-");
        return [row];
      }
      return r.shards.map((s) => {
        const row = [
          r.id,
          r.state,
          r.profile ?? "-",
          String(s.rank),
          s.node,
          s.gpu_indices.join(","),
          shardStateCell(s),
          String(s.restarts),
          progressCell(s),
        ];
        if (wide) {
          row.push(s.port === 0 ? "-" : String(s.port), s.shard_id);
        }
        return row;
      });
    }),
  );
}

/**
 * Events one line each: a message past its first line or `width` is cut at a
 * word. `wide` adds the incarnation each is about (its uid's first 8
 * characters, "-" for none), which tells a name's earlier objects apart.
 */
export function eventTable(events: readonly EventListing[], width = 80, wide = false): string {
  return renderTable(
    ["TIME", "KIND", "SUBJECT", ...(wide ? ["INCARNATION"] : []), "MESSAGE"],
    events.map((e) => [
      new Date(e.at).toISOString(),
      e.kind,
      e.subject,
      ...(wide ? [e.uid ? e.uid.slice(0, 8) : "-"] : []),
      cutAtWord(e.message, width),
    ]),
  );
}

/** Events in full, for describe: every line of each message, indented under its head. */
export function eventBlock(events: readonly EventListing[]): string[] {
  if (events.length === 0) return ["  (none)"];
  return events.flatMap((e) => {
    const [first, ...rest] = e.message.split("\n");
    return [
      `  ${new Date(e.at).toISOString()}  ${e.kind}  ${first}`,
      ...rest.map((l) => `      ${l}`),
    ];
  });
}

/** What explain says of a replica's failures: the given-up reason or each shard's last one. */
export function failureLines(r: ReplicaListing): string[] {
  const out: string[] = [];
  const tail = (lines: readonly string[]) =>
    lines.length === 0 ? [] : ["    log tail:", ...lines.slice(-20).map((l) => `      ${l}`)];
  if (r.failure) {
    out.push(
      r.state === "failed"
        ? `  failed after ${r.failure.attempts} placement(s), not retried until the deployment changes:`
        : `  moved off the node(s) that gave up on it (placement ${r.failure.attempts} of at most 3):`,
      `    ${r.failure.reason}`,
      ...tail(r.failure.log_tail),
    );
  }
  for (const s of r.shards) {
    if (!s.last_failure) continue;
    const c = s.crash_loop;
    if (c !== null && c !== undefined) {
      out.push(
        `  rank ${s.rank} is crash-looping on ${s.node}: ${c.failures} failures in a row ` +
          `(the agent gives up there at ${c.limit})`,
      );
    }
    out.push(
      `  rank ${s.rank} last failure: ${s.last_failure.reason}`,
      ...tail(s.last_failure.log_tail),
    );
  }
  return out;
}

/**
 * What explain prints for one replica: its state, failures, the explanation
 * of its placement, and what placement says on the live inventory now.
 */
export function explainLines(x: LiveExplanation): string[] {
  const r = x.replica;
  const lines = [`replica ${r.id}: ${r.state}${r.profile ? ` (profile ${r.profile})` : ""}`];
  lines.push(...failureLines(r));
  if (r.explanation !== null && r.state !== "pending") {
    lines.push(`  when placed: ${r.explanation.summary}`);
  }
  if (x.live === null) {
    lines.push("  its deployment is gone: it is being removed");
    return lines;
  }
  lines.push(
    `  on the live inventory (${x.nodes} node${x.nodes === 1 ? "" : "s"}, ${
      x.detail === "full" ? "every node" : "grouped by reason"
    }):`,
  );
  lines.push(
    ...explanationLines(x.live, { detail: x.detail === "full" }).map((l) => `    ${l}`),
  );
  return lines;
}
