/**
 * The answers the gateway gives itself, instead of an engine's (design §12,
 * the error table of docs/gateway.md), in OpenAI's error shape: each written
 * once, whichever step of the request refuses.
 *
 * @module
 */
import { errorResponse, openAiError } from "./openai_error.ts";

/** 400: the request is malformed (`param` names the field at fault). */
export function invalidRequest(
  message: string,
  param: string | null = null,
  code: string | null = null,
): Response {
  return errorResponse(400, openAiError(message, "invalid_request_error", code, param));
}

/** 413: the body is over the gateway's limit. */
export function tooLarge(message: string): Response {
  return errorResponse(413, openAiError(message, "invalid_request_error", "request_too_large"));
}

/** 401: no key, or a wrong one, while keys exist. */
export function unauthorized(): Response {
  return errorResponse(
    401,
    openAiError(
      "Incorrect or missing API key (Authorization: Bearer …).",
      "invalid_request_error",
      "invalid_api_key",
    ),
  );
}

/** 403: no key exists and the client is not on loopback. */
export function loopbackOnly(): Response {
  return errorResponse(
    403,
    openAiError(
      "This gateway has no API keys configured, so it serves loopback clients only; " +
        "create a key with `llmgw apikeys create`.",
      "invalid_request_error",
      "gateway_not_open",
    ),
  );
}

/**
 * 404: no such model, or one the key may not use (the same answer, so keys
 * cannot probe the model list); `param` is "model" when the body named it.
 */
export function modelNotFound(model: string, param: string | null = null): Response {
  return errorResponse(
    404,
    openAiError(
      `The model \`${model}\` does not exist or you do not have access to it`,
      "invalid_request_error",
      "model_not_found",
      param,
    ),
  );
}

/** 503: before the table's first sync, no model is unknown yet. */
export function notSynced(retryAfter: string): Response {
  return errorResponse(
    503,
    openAiError("the gateway has not synced with the control plane yet", "server_error"),
    { "retry-after": retryAfter },
  );
}

/** 503: a deployed model with no ready replica. */
export function modelNotReady(model: string, retryAfter: string): Response {
  return errorResponse(
    503,
    openAiError(
      `model \`${model}\` has no ready replica; retry later`,
      "server_error",
      "model_not_ready",
    ),
    { "retry-after": retryAfter },
  );
}

/**
 * 503: every replica of `model` is behind a down engine proxy, and the hold
 * ended as `held` says. Node addresses stay in the gateway's log, not in a
 * client's error.
 */
export function replicaUnreachable(model: string, held: string, retryAfter: string): Response {
  return errorResponse(
    503,
    openAiError(
      `no replica of \`${model}\` could be reached: the engine proxy of every node serving it ` +
        `is down (an agent restarting?) and ${held}`,
      "server_error",
      "replica_unreachable",
    ),
    { "retry-after": retryAfter },
  );
}

/** 502: no replica of `model` could be reached directly; `lastError` is the last reason ("" if none). */
export function upstreamUnreachable(
  model: string,
  lastError: string,
  retryAfter: string,
): Response {
  return errorResponse(
    502,
    openAiError(
      `no replica of \`${model}\` could be reached${lastError ? `: ${lastError}` : ""}`,
      "server_error",
      "upstream_unreachable",
    ),
    { "retry-after": retryAfter },
  );
}

/** 499: the client went away before an answer (nginx's status; no client reads it). */
export function clientClosed(): Response {
  return errorResponse(499, openAiError("client closed request", "invalid_request_error"));
}

/** 502: an engine answered wrongly or broke off (never retried: it may have acted). */
export function brokenUpstream(message: string): Response {
  return errorResponse(502, openAiError(message, "server_error", "upstream_error"));
}

/** 404: a path the gateway does not serve. */
export function noSuchRoute(): Response {
  return errorResponse(
    404,
    openAiError("no such route on the llmgw gateway", "invalid_request_error", "not_found"),
  );
}

/** 500: a fault of the gateway's own (the details go to its log, not to the client). */
export function internalError(): Response {
  return errorResponse(500, openAiError("internal gateway error", "server_error"));
}
