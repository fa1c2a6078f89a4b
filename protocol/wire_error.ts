/**
 * A body from another role that does not match its contract: one error
 * class for every protocol schema, whose message names each field path the
 * way operator input errors do (validation/issues.ts), so a bad answer reads
 * `Cannot use the endpoint list: endpoints[2].url: must be an http(s) URL`.
 *
 * @module
 */
import type { z } from "zod";
import { formatPath, type InputIssue, zodIssues } from "../validation/issues.ts";

/** One problem with a body, and what the path is inside when the path alone does not say. */
export interface WireIssue extends InputIssue {
  /** The thing the path is in, e.g. `shard "r1-s0"`; shown beside the path. */
  about?: string;
}

/** How many issues a message lists; the rest are counted. */
const LISTED_ISSUES = 3;

/** A body that does not match its protocol schema. */
export class WireFormatError extends Error {
  /** What the body was, e.g. `the desired state`. */
  readonly what: string;
  /** Every problem found, each with its field path. */
  readonly issues: readonly WireIssue[];

  /** Creates the error; `issues` must not be empty. */
  constructor(what: string, issues: readonly WireIssue[]) {
    super(`Cannot use ${what}: ${describeIssues(issues)}`);
    this.name = "WireFormatError";
    this.what = what;
    this.issues = issues;
  }

  /** The problems as one line, without the leading "Cannot use …". */
  get detail(): string {
    return describeIssues(this.issues);
  }
}

/** Formats one issue as `path (about): message`. */
export function formatWireIssue(issue: WireIssue): string {
  const about = issue.about === undefined ? "" : ` (${issue.about})`;
  return `${formatPath(issue.path)}${about}: ${issue.message}`;
}

/** Formats issues as one line: the first few, then how many more. */
export function describeIssues(issues: readonly WireIssue[]): string {
  const listed = issues.slice(0, LISTED_ISSUES).map(formatWireIssue).join("; ");
  const more = issues.length - LISTED_ISSUES;
  return more > 0 ? `${listed}; and ${more} more` : listed;
}

/**
 * Parses `value` with `schema`, or throws a {@link WireFormatError} naming
 * `what` and each wrong field's path.
 */
export function parseWire<S extends z.ZodType>(
  schema: S,
  value: unknown,
  what: string,
): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new WireFormatError(what, zodIssues(parsed.error));
  return parsed.data;
}
