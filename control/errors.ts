/**
 * The control plane's domain errors. Services throw these; the HTTP layer
 * maps each class to a status in one `onError` (api.ts), so no service knows
 * about HTTP.
 *
 * @module
 */
import { formatPath, type InputIssue } from "../validation/issues.ts";

/** A control-plane error with a stable code and, for bad input, the field path. */
export class ControlError extends Error {
  /** Stable code, e.g. `not_found`, `conflict`, `invalid_request`. */
  readonly code: string;
  /** The field path, for bad input. */
  readonly path: string | null;
  /** Creates the error. */
  constructor(code: string, message: string, path: string | null = null) {
    super(message);
    this.name = "ControlError";
    this.code = code;
    this.path = path;
  }
}

/** A node, deployment, replica or key that does not exist. */
export class NotFoundError extends ControlError {
  /** Creates the error; `code` is `not_found` unless a more precise one applies. */
  constructor(message: string, code = "not_found") {
    super(code, message);
    this.name = "NotFoundError";
  }
}

/** A request that clashes with what exists (a served model name taken). */
export class ConflictError extends ControlError {
  /** Creates the error. */
  constructor(message: string, path: string | null = null) {
    super("conflict", message, path);
    this.name = "ConflictError";
  }
}

/** A caller that may not do this (a node id bound to another credential). */
export class ForbiddenError extends ControlError {
  /** Creates the error. */
  constructor(code: string, message: string) {
    super(code, message);
    this.name = "ForbiddenError";
  }
}

/** Input that cannot be used: every issue with its field path. */
export class InvalidInputError extends ControlError {
  /** The issues, first one's path in `path`. */
  readonly issues: readonly InputIssue[];
  /** Creates the error from issues: "WHAT: path: message; path: message". */
  constructor(what: string, issues: readonly InputIssue[]) {
    super(
      "invalid_request",
      `${what}: ${issues.map((i) => `${formatPath(i.path)}: ${i.message}`).join("; ")}`,
      issues[0] === undefined ? null : formatPath(issues[0].path),
    );
    this.name = "InvalidInputError";
    this.issues = issues;
  }
}

/** A node's agent that cannot be asked (no local API, unreachable, or a bad answer). */
export class AgentUnavailableError extends ControlError {
  /** Creates the error. */
  constructor(code: string, message: string) {
    super(code, message);
    this.name = "AgentUnavailableError";
  }
}

/** An answer that is not known yet (the ready set right after a restart). */
export class NotSettledError extends ControlError {
  /** Creates the error. */
  constructor(message: string) {
    super("settling", message);
    this.name = "NotSettledError";
  }
}

/** The message of anything thrown (text/error_message.ts owns the rule). */
export { errorMessage } from "../text/error_message.ts";
