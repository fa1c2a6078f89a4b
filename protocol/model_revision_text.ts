/**
 * A model revision and a host's copy of it in a few words, as `llmgw get
 * models` and the dashboard's models page show them (issue #25 item 5), and
 * why a pull failed on a host, as `llmgw models pulls` says it too.
 *
 * @module
 */
import { shortCommit } from "../deployment/model_revision.ts";
import { cutAtWord } from "../text/table.ts";
import type { ModelHostView, ModelRevisionView } from "./model_admin.ts";
import { downloadPercent } from "./shard_download.ts";

/**
 * Display columns of a failure's words in a list's cell (`get models`, the
 * dashboard); describe shows them whole. A hub's answer naming the model, a
 * full commit and the endpoint fits (about 135), an agent's 4096 do not.
 */
export const WHY_IN_LIST = 160;

/** `main@1a2b3c4`; `main@?` while unresolved; `1a2b3c4` when only agents report it; `-` for a path. */
export function revisionCell(v: ModelRevisionView): string {
  const commit = v.commit === null ? "?" : shortCommit(v.commit);
  if (v.revision === null) return v.commit === null ? "-" : commit;
  return `${v.revision}@${commit}`;
}

/**
 * `downloading 45%`, `complete`, `requested`, `failed (gated: model … is
 * gated: …)`; the failure's words cut at `whyMax` display columns when given.
 */
export function hostState(h: ModelHostView, whyMax?: number): string {
  if (h.state === "failed") {
    const why = failureWhy(h.failure?.kind, h.failure?.message);
    if (why === "") return "failed";
    return `failed (${whyMax === undefined ? why : cutAtWord(why, whyMax)})`;
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
 * `get models` and the dashboard say it; empty when neither is known. The
 * agent's words may carry a hub's `X-Error-Message` or a file name: terminal
 * escape sequences are dropped and every other C0/C1 control character
 * (a newline, a tab, a bell) becomes one space, so printing them is safe.
 */
export function failureWhy(kind: string | undefined, message: string | null | undefined): string {
  return [kind, message].filter((x) => x).map((x) => printable(x!)).filter((x) => x).join(": ");
}

/** An escape sequence: CSI (`ESC [ … final`, or its C1 form) and OSC (`ESC ] … BEL or ST`). */
const ESCAPE_SEQUENCE =
  // deno-lint-ignore no-control-regex
  /(?:\u001b\[|\u009b)[\u0030-\u003f]*[\u0020-\u002f]*[\u0040-\u007e]|(?:\u001b\]|\u009d)[^\u0007\u001b\u009c]*(?:\u0007|\u001b\\|\u009c)?/g;

/** A run of C0 or C1 control characters, DEL included, with a space on either side. */
// deno-lint-ignore no-control-regex
const CONTROLS = / ?[\u0000-\u001f\u007f-\u009f]+ ?/g;

function printable(text: string): string {
  return text.replace(ESCAPE_SEQUENCE, "").replace(CONTROLS, " ").trim();
}

/** `hosts` with the failed first (what an operator acts on), each group in its order. */
export function failedFirst<T extends { state: string }>(hosts: readonly T[]): T[] {
  return [
    ...hosts.filter((h) => h.state === "failed"),
    ...hosts.filter((h) => h.state !== "failed"),
  ];
}
