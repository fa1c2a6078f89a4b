/**
 * Problems with operator input (deployment files, cluster files, API
 * bodies), each with the path of the field it is about, so every error says
 * what was wrong and where.
 *
 * @module
 */
import type { z } from "zod";

/** A path into a document, e.g. `["profiles", 0, "gpus_per_node"]`. */
export type FieldPath = (string | number)[];

/** One problem with a document. */
export interface InputIssue {
  /** Where in the document. */
  path: FieldPath;
  /** What is wrong and what is expected. */
  message: string;
}

/** Formats a path as `profiles[0].gpus_per_node`. */
export function formatPath(path: FieldPath): string {
  if (path.length === 0) return "(top level)";
  return path.map((p, i) => typeof p === "number" ? `[${p}]` : i === 0 ? p : `.${p}`).join("");
}

/** Formats issues one per line, each led by its path. */
export function formatIssues(issues: readonly InputIssue[]): string {
  return issues.map((i) => `  ${formatPath(i.path)}: ${i.message}`).join("\n");
}

/** Turns zod's issues into field paths and messages that say what was expected. */
export function zodIssues(error: z.ZodError): InputIssue[] {
  return error.issues.map((issue) => {
    const path = issue.path.filter((p): p is string | number => typeof p !== "symbol");
    let message = issue.message;
    if (issue.code === "unrecognized_keys") {
      message = `unknown field${issue.keys.length > 1 ? "s" : ""} ${
        issue.keys.map((k) => `"${k}"`).join(", ")
      }`;
    }
    return { path, message };
  });
}
