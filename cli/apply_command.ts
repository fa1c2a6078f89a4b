/**
 * `llmgw apply -f FILE|DIR|- [--dry-run]`: each document to the control
 * plane, which validates it and compares it with the live spec in canonical
 * form (deployment/canonical.ts). One line per deployment as kubectl prints
 * it (`deployment/llama-8b unchanged`); with `--dry-run` the control plane
 * stores nothing and answers what would change, field by field, and which
 * replicas a new revision would replace.
 *
 * @module
 */
import { ApplyAnswer, type ApplyListing } from "../protocol/admin_protocol.ts";
import { describeChange } from "../protocol/apply_answer.ts";
import { adminAnswer, type AdminCall, AdminError } from "./admin_client.ts";
import { readApplySources } from "./apply_sources.ts";

/** How `apply` runs. */
export interface ApplyFlags {
  /** Print the answers as JSON, one entry per document with its source. */
  json: boolean;
  /** Ask the control plane what each apply would do; change nothing. */
  dryRun: boolean;
}

/** Runs `apply`; returns the exit code. */
export async function applyCommand(
  call: AdminCall,
  files: readonly string[],
  flags: ApplyFlags,
  out: (t: string) => void,
  stdin?: () => Promise<string>,
): Promise<number> {
  const docs = await readApplySources(files, stdin);
  const query = flags.dryRun ? "?dry_run=true" : "";
  const applied = [];
  for (const { source, doc } of docs) {
    const r = await adminAnswer(call, ApplyAnswer, "POST", `/v1/deployments${query}`, doc)
      .catch((e) => {
        // Which document it was, the status kept (AdminError is all a call throws).
        throw e instanceof AdminError ? new AdminError(`${source}: ${e.message}`, e.status) : e;
      });
    applied.push({ source, ...r });
    if (flags.json) continue;
    for (const w of r.warnings) out(`warning: ${source}: ${w.message}\n`);
    out(applyLines(r).join("\n") + "\n");
  }
  if (flags.json) out(JSON.stringify(applied, null, 2) + "\n");
  return 0;
}

/** An answer as kubectl-style lines: what happened, then each change and the replicas that roll. */
export function applyLines(r: ApplyListing): string[] {
  const d = r.deployment;
  const count = `${d.replicas} replica${d.replicas === 1 ? "" : "s"}`;
  const dry = r.dry_run ? " (dry run)" : "";
  const head = `deployment/${d.name}`;
  const lines: string[] = [];
  switch (r.result) {
    case "created":
      lines.push(`${head} created${dry}: ${count}`);
      break;
    case "unchanged":
      lines.push(`${head} unchanged${dry}`);
      break;
    case "scaled":
      lines.push(`${head} scaled${dry} to ${count}; nothing restarts`);
      break;
    case "configured":
      lines.push(`${head} configured${dry}; nothing restarts`);
      break;
    case "updated": {
      const verb = r.dry_run ? "would replace" : "replacing";
      lines.push(
        `${head} updated${dry}: revision ${r.revision}, ${verb} ${r.rolling.length} ` +
          `replica${r.rolling.length === 1 ? "" : "s"} one at a time` +
          (r.rolling.length === 0 ? "" : ` (${r.rolling.join(", ")})`),
      );
      break;
    }
  }
  for (const c of r.changes) lines.push(`  ${describeChange(c)}${c.rolls ? "" : " (no restart)"}`);
  return lines;
}
