/**
 * What can go wrong talking to a hub, one small class each, with messages an
 * operator can act on. None of them ever holds the token: a message names
 * the endpoint, the model, the revision and the file, never a header.
 *
 * `retryable` tells the model cache whether to try again later (the hub is
 * down or busy) or to fail the replica with the hub's answer (unknown repo,
 * revision or file, gated): an endless retry of a typo helps no one.
 *
 * @module
 */
import {
  HEADER_ERROR_CODE,
  HEADER_ERROR_MESSAGE,
  HEADER_REPO_COMMIT,
  INVALID_CREDENTIALS_MESSAGE,
} from "./hub_protocol.ts";

/** Any failure of a hub conversation. */
export class HubError extends Error {
  /** Whether the same request may succeed later. */
  readonly retryable: boolean;
  /** Builds one. */
  constructor(message: string, retryable: boolean) {
    super(message);
    this.name = new.target.name;
    this.retryable = retryable;
  }
}

/** The hub does not know the repo (or hides it: private, no access). */
export class HubRepoNotFoundError extends HubError {
  /** Builds one. */
  constructor(readonly repo: string, endpoint: string) {
    super(
      `model ${repo} not found on ${endpoint} (if it is private, set HF_TOKEN to a token that can read it)`,
      false,
    );
  }
}

/** The repo exists but the branch, tag or commit does not. */
export class HubRevisionNotFoundError extends HubError {
  /** Builds one. */
  constructor(readonly repo: string, readonly revision: string, endpoint: string) {
    super(`model ${repo} revision ${revision} not found on ${endpoint}`, false);
  }
}

/** The revision exists but has no such file. */
export class HubEntryNotFoundError extends HubError {
  /** Builds one. */
  constructor(
    readonly repo: string,
    readonly revision: string,
    readonly file: string,
    endpoint: string,
  ) {
    super(`file ${file} of model ${repo} revision ${revision} not found on ${endpoint}`, false);
  }
}

/** The repo is gated and the request had no token, or one not granted access. */
export class HubGatedError extends HubError {
  /** Builds one; `hadToken` says which of the two. */
  constructor(readonly repo: string, hadToken: boolean, endpoint: string) {
    super(
      hadToken
        ? `model ${repo} is gated and HF_TOKEN was not granted access: ask for access at ${endpoint}/${repo}`
        : `model ${repo} is gated: set HF_TOKEN to a token that was granted access`,
      false,
    );
  }
}

/** The hub does not accept the token at all. */
export class HubAuthError extends HubError {
  /** Builds one. */
  constructor(endpoint: string) {
    super(
      `hub ${endpoint} refused HF_TOKEN: invalid credentials (check or renew the token)`,
      false,
    );
  }
}

/** No answer: connection refused, name not resolved, timed out, TLS failed. */
export class HubUnreachableError extends HubError {
  /** Builds one; `origin` is the host asked (the hub or its CDN), `reason` a few words. */
  constructor(readonly origin: string, readonly reason: string) {
    super(`hub ${origin} unreachable: ${reason}`, true);
  }
}

/** An answer llmgw cannot use: an unexpected status, a malformed body or header. */
export class HubAnswerError extends HubError {
  /** Builds one; `retryable` for 5xx and 429. */
  constructor(message: string, retryable = false) {
    super(message, retryable);
  }
}

/** The few words of why a request got no answer, from the fetch error (never its URL). */
export function unreachableReason(e: unknown): string {
  const text = e instanceof Error ? `${e.message} ${String(e.cause ?? "")}` : String(e);
  if (/connection refused/i.test(text)) return "connection refused";
  if (/connection reset|reset by peer/i.test(text)) return "connection reset";
  if (/dns|lookup|name or service|not known|resolve/i.test(text)) return "name not resolved";
  if (/timed? ?out/i.test(text)) return "timed out";
  if (/certificate|tls|ssl/i.test(text)) return "TLS handshake failed";
  return "network error";
}

/** What a refused request was about, for the message. */
export interface HubRequestContext {
  /** The endpoint, as configured (never with a token). */
  endpoint: string;
  /** The repo id. */
  repo: string;
  /** The revision or commit asked for. */
  revision: string;
  /** The file, for resolve and CDN requests. */
  file?: string;
  /** Whether the request carried a token. */
  hadToken: boolean;
}

/**
 * The error for a refusal, read as huggingface_hub's `hf_raise_for_status`
 * reads it: `X-Error-Code` first; a 401 without one on a repo URL is an
 * unknown (or hidden) repo, unless the hub says the token itself is invalid.
 */
export function errorFromAnswer(response: Response, ctx: HubRequestContext): HubError {
  const code = response.headers.get(HEADER_ERROR_CODE);
  const message = response.headers.get(HEADER_ERROR_MESSAGE);
  const { endpoint, repo, revision, file } = ctx;
  switch (code) {
    case "RevisionNotFound":
      return new HubRevisionNotFoundError(repo, revision, endpoint);
    case "EntryNotFound": {
      const at = response.headers.get(HEADER_REPO_COMMIT) ?? revision;
      return new HubEntryNotFoundError(repo, at, file ?? "(unknown)", endpoint);
    }
    case "GatedRepo":
      return new HubGatedError(repo, ctx.hadToken, endpoint);
    case "RepoNotFound":
      return new HubRepoNotFoundError(repo, endpoint);
  }
  if (response.status === 401) {
    return message === INVALID_CREDENTIALS_MESSAGE
      ? new HubAuthError(endpoint)
      : new HubRepoNotFoundError(repo, endpoint);
  }
  const what = file === undefined
    ? `model ${repo} revision ${revision}`
    : `file ${file} of model ${repo} revision ${revision}`;
  const why = message ? `: ${message.slice(0, 200)}` : "";
  const retryable = response.status >= 500 || response.status === 429 || response.status === 408;
  return new HubAnswerError(
    `hub ${endpoint} answered ${response.status} for ${what}${why}`,
    retryable,
  );
}
