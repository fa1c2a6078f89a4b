/**
 * A deployment's model `revision` (issue #25 item 1): a branch, a tag or a
 * 40-hex commit of a hub repository, checked as git checks a ref name
 * (`git check-ref-format`, the rules the hub's refs obey: no space or
 * control character, none of `~ ^ : ? * [ \`, no `..`, `@{` or `//`, no
 * part that starts with `.` or ends with `.lock`, not `@`, not starting with
 * `-` or `/` or ending with `/` or `.`), so a typo is refused at apply with
 * what is wrong rather than by every agent's download. A local path model
 * takes none: its files are used as they are. Pure.
 *
 * @module
 */
import { localModelDir } from "../models/facts_source.ts";
import { DEFAULT_REVISION } from "../models/hub_protocol.ts";

export { DEFAULT_REVISION };

/** The longest revision accepted (the hub's refs are far shorter; a guard for bad input). */
export const MAX_REVISION_CHARS = 255;

/** Why `revision` is not a usable ref name, or null when it is. */
export function revisionProblem(revision: string): string | null {
  if (revision.length === 0) return "is empty";
  if (revision.length > MAX_REVISION_CHARS) {
    return `is ${revision.length} characters; at most ${MAX_REVISION_CHARS}`;
  }
  // deno-lint-ignore no-control-regex
  const bad = /[\x00-\x20\x7f~^:?*[\\]/.exec(revision);
  if (bad !== null) {
    const code = bad[0].charCodeAt(0);
    const shown = bad[0] === " "
      ? "a space"
      : code < 0x20 || code === 0x7f
      ? "a control character"
      : `"${bad[0]}"`;
    return `holds ${shown}; a branch, tag or commit has none`;
  }
  if (revision.includes("..")) return 'holds ".."; a branch, tag or commit has none';
  if (revision.includes("@{")) return 'holds "@{"; a branch, tag or commit has none';
  if (revision === "@") return 'is "@", which git reserves';
  if (revision.startsWith("-")) return 'starts with "-"';
  if (revision.startsWith("/") || revision.endsWith("/") || revision.includes("//")) {
    return 'has an empty part between "/"';
  }
  if (revision.endsWith(".")) return 'ends with "."';
  for (const part of revision.split("/")) {
    if (part.startsWith(".")) return `has a part starting with "." (${part})`;
    if (part.endsWith(".lock")) return `has a part ending with ".lock" (${part})`;
  }
  return null;
}

/** A commit as tables and pages show it: its first 7 hex digits, as git abbreviates one. */
export function shortCommit(commit: string): string {
  return commit.slice(0, 7);
}

/** True for a model given as a local or shared path (absolute, or `file://`): it takes no revision. */
export function isLocalModel(model: string): boolean {
  return model.startsWith("file://") || localModelDir(model) !== null;
}

/**
 * The revision a deployment's model is read at: the one given, else
 * {@link DEFAULT_REVISION} for a hub id; none for a local path.
 */
export function modelRevision(model: string, revision: string | undefined): string | undefined {
  if (isLocalModel(model)) return undefined;
  return revision ?? DEFAULT_REVISION;
}
