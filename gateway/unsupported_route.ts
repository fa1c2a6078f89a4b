/**
 * An engine that does not serve a route the gateway forwards (design §12):
 * `POST /v1/responses` is vLLM's, and an engine without it answers its web
 * framework's 404 (`{"detail": "Not Found"}`), or a node's engine proxy that
 * does not forward it refuses with `route_not_allowed`. Clients get an
 * OpenAI-shaped 404 naming the model instead. An engine's own OpenAI error
 * with status 404 (vLLM's unknown `previous_response_id`) is the engine's
 * answer and goes through as is.
 *
 * @module
 */
import { PROXY_REFUSED_HEADER } from "../protocol/engine_proxy_protocol.ts";
import { errorResponse, openAiError } from "./openai_error.ts";

/** The route whose engine 404s are read this way. */
export const RESPONSES_ROUTE = "/v1/responses";

/** The largest 404 body read to tell the two apart, in bytes (FastAPI's is 22). */
export const MAX_NOT_FOUND_BYTES = 64 * 1024;

/** The error code of a model whose engine does not serve the route. */
export const UNSUPPORTED_ENDPOINT = "unsupported_endpoint";

/**
 * Whether an engine's 404 means it has no such route: a proxy refusal
 * `route_not_allowed`, or any body that is not an OpenAI error object.
 */
export function lacksRoute(headers: Headers, body: Uint8Array): boolean {
  if (headers.get(PROXY_REFUSED_HEADER) === "route_not_allowed") return true;
  try {
    const parsed = JSON.parse(new TextDecoder().decode(body));
    const error = (parsed as { error?: unknown } | null)?.error;
    return typeof error !== "object" || error === null || Array.isArray(error);
  } catch {
    return true;
  }
}

/** The 404 for a model whose engine does not serve `route`. */
export function unsupportedEndpoint(model: string, route: string): Response {
  return errorResponse(
    404,
    openAiError(
      route === RESPONSES_ROUTE
        ? `The model \`${model}\` does not serve the Responses API (POST ${route}); ` +
          "use /v1/chat/completions"
        : `The model \`${model}\` does not serve POST ${route}`,
      "invalid_request_error",
      UNSUPPORTED_ENDPOINT,
    ),
  );
}
