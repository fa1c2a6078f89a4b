/**
 * A model revision and a host's copy of it in a few words, as `llmgw get
 * models` and the dashboard's models page show them (issue #25 item 5).
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

/** `downloading 45%`, `complete`, `requested`. */
export function hostState(h: ModelHostView): string {
  if (h.state !== "downloading") return h.state;
  const pct = h.bytes === null
    ? null
    : downloadPercent({ bytes_done: h.bytes_done, bytes_total: h.bytes });
  return pct === null ? "downloading" : `downloading ${pct}%`;
}
