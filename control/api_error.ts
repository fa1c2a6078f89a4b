/**
 * Errors the control plane's API answers with: a status, a stable code, a
 * message naming what was wrong and, for bad input, the field path. Never a
 * 500 for a malformed request.
 *
 * @module
 */
import { formatPath, type InputIssue } from "../validation/issues.ts";
import type { ErrorBody } from "../protocol/error_body.ts";

/** An error with its HTTP status. */
export class ApiError extends Error {
  /** HTTP status, 4xx for the caller's mistakes. */
  readonly status: number;
  /** Stable code, e.g. `not_found`, `invalid_request`, `unauthorized`. */
  readonly code: string;
  /** The field path, for bad input. */
  readonly path: string | null;
  /** Creates the error. */
  constructor(status: number, code: string, message: string, path: string | null = null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.path = path;
  }

  /** A 400 from input issues: the first one's path, all of them in the message. */
  static fromIssues(what: string, issues: readonly InputIssue[]): ApiError {
    const first = issues[0];
    const message = `${what}: ` +
      issues.map((i) => `${formatPath(i.path)}: ${i.message}`).join("; ");
    return new ApiError(400, "invalid_request", message, first ? formatPath(first.path) : null);
  }

  /** The JSON body: `{error: {code, message, path}}`. */
  body(): ErrorBody {
    return { error: { code: this.code, message: this.message, path: this.path } };
  }
}
