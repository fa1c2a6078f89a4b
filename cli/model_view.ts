/**
 * Model revisions as `llmgw get models` and `describe model` print them
 * (issue #25 item 5): one line per revision (size, deployments, pinned, and
 * each host's copy: complete, downloading n%, requested, failed with its
 * agent's words, failed first), and one model in full with its facts.
 *
 * @module
 */
import type { ModelDetail, ModelHostView, ModelRevisionView } from "../protocol/model_admin.ts";
import { formatBytes } from "../text/bytes.ts";
import {
  failedFirst,
  failureWhy,
  hostState,
  revisionCell,
  WHY_IN_LIST,
} from "../protocol/model_revision_text.ts";
import { renderTable } from "../text/table.ts";

/** Hosts a line names before "+N more" (all with `-o wide`). */
const HOSTS_IN_LINE = 4;

/** "n4 failed (gated: …), n1 complete, n2 downloading 45%, +3 more"; "-" for none. */
function hostsCell(hosts: readonly ModelHostView[], wide: boolean): string {
  if (hosts.length === 0) return "-";
  const ordered = failedFirst(hosts);
  const shown = wide ? ordered : ordered.slice(0, HOSTS_IN_LINE);
  const more = hosts.length - shown.length;
  return shown.map((h) => `${h.node} ${hostState(h, WHY_IN_LIST)}`).join(", ") +
    (more > 0 ? `, +${more} more` : "");
}

/** Every revision as a table. */
export function modelTable(models: readonly ModelRevisionView[], wide = false): string {
  if (models.length === 0) return "No model revisions.";
  return renderTable(
    ["MODEL", "REVISION", "SIZE", "PINNED", "DEPLOYMENTS", "HOSTS"],
    models.map((v) => [
      v.model,
      revisionCell(v),
      v.bytes === null ? "?" : formatBytes(v.bytes),
      v.pinned ? "yes" : "no",
      v.deployments.join(",") || "-",
      hostsCell(v.hosts, wide),
    ]),
  );
}

const field = (name: string, value: string) => `${`${name}:`.padEnd(14)}${value}`;

/** One model in full: each revision with its commit, size, facts, deployments and hosts. */
export function modelText(d: ModelDetail): string {
  const out = [field("Model", d.model)];
  for (const v of d.revisions) {
    const f = v.facts;
    out.push(
      field(
        "Revision",
        `${v.revision ?? "(reported by agents)"} → ${v.commit ?? "not resolved yet"}`,
      ),
      `  ${field("Size", v.bytes === null ? "unknown" : formatBytes(v.bytes))}`,
      `  ${field("Pinned", v.pinned ? "yes: agents never evict it" : "no")}`,
      `  ${field("Deployments", v.deployments.join(", ") || "-")}`,
      `  ${
        field(
          "Facts",
          f === null
            ? "unknown (the control plane has not read its config.json)"
            : `weights ${formatBytes(f.weight_bytes)}, ${
              f.dtype ?? "dtype ?"
            }, ${f.layers} layers, ` +
              `${f.attention_heads} attention / ${f.kv_heads} KV heads, context ${f.context_length}` +
              (f.quantization === null ? "" : `, ${f.quantization.method}`),
        )
      }`,
      "  Hosts:",
      v.hosts.length === 0 ? "    (none)" : renderTable(
        ["NODE", "STATE", "ON DISK", "LAST USED"],
        v.hosts.map((h) => [
          h.node,
          h.state === "failed" ? "failed" : hostState(h),
          formatBytes(h.bytes_done),
          h.last_used === null ? "-" : new Date(h.last_used).toISOString(),
        ]),
      ).split("\n").map((l) => `    ${l}`).join("\n"),
    );
    // The agents' words on a line each: too long for a table cell.
    const failed = v.hosts.filter((h) => h.state === "failed");
    if (failed.length > 0) {
      out.push(
        "  Failed pulls (llmgw models pull asks again):",
        ...failed.map((h) =>
          `    ${h.node} at ${
            h.failure === undefined ? "?" : new Date(h.failure.at).toISOString()
          }: ` +
          (failureWhy(h.failure?.kind, h.failure?.message) || "failed")
        ),
      );
    }
  }
  return out.join("\n") + "\n";
}
