/**
 * A model revision and a host's copy of it in a few words, as `llmgw get
 * models` and the dashboard's models page show them (issue #25 item 5), and
 * why a pull failed on a host, as `llmgw models pulls` says it too.
 *
 * @module
 */
import { shortCommit } from "../deployment/model_revision.ts";
import type { ModelHostView, ModelRevisionView } from "./model_admin.ts";
import { downloadPercent } from "./shard_download.ts";

/** `main@1a2b3c4`; `main@?` while unresolved; `1a2b3c4` when only agents report it; `-` for a path. */
export function revisionCell(v: ModelRevisionView): string {
  const commit = v.commit === null ? "?" : shortCommit(v.commit);
  if (v.revision === null) return v.commit === null ? "-" : commit;
  return `${v.revision}@${commit}`;
}

/** `downloading 45%`, `complete`, `requested`, `failed (gated: model … is gated: …)`. */
export function hostState(h: ModelHostView): string {
  if (h.state === "failed") {
    const why = failureWhy(h.failure?.kind, h.failure?.message);
    return why === "" ? "failed" : `failed (${why})`;
  }
  if (h.state !== "downloading") return h.state;
  const pct = h.bytes === null
    ? null
    : downloadPercent({ bytes_done: h.bytes_done, bytes_total: h.bytes });
  return pct === null ? "downloading" : `downloading ${pct}%`;
}

/**
 * A pull's failure on a node in a few words, its kind then the agent's
 * (`revision_not_found: model … not found on …`), as `llmgw models pulls`,
 * `get models` and the dashboard say it; empty when neither is known.
 */
export function failureWhy(kind: string | undefined, message: string | null | undefined): string {
  return [kind, message].filter((x) => x).join(": ");
}

/** `hosts` with the failed first (what an operator acts on), each group in its order. */
export function failedFirst<T extends { state: string }>(hosts: readonly T[]): T[] {
  return [
    ...hosts.filter((h) => h.state === "failed"),
    ...hosts.filter((h) => h.state !== "failed"),
  ];
}
