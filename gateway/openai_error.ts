/**
 * OpenAI-style error responses of the gateway (design §12):
 * `{"error": {"message", "type", "param", "code"}}`, as the engines and the
 * official clients use them.
 *
 * @module
 */

/** The body of an OpenAI error. */
export interface OpenAiErrorBody {
  /** The error. */
  error: {
    /** What went wrong, for people. */
    message: string;
    /** OpenAI's error type (`invalid_request_error`, `server_error`, …). */
    type: string;
    /** The request field at fault, or null. */
    param: string | null;
    /** A machine-readable code (`model_not_found`, …), or null. */
    code: string | null;
  };
}

/** Builds an OpenAI error body. */
export function openAiError(
  message: string,
  type: string,
  code: string | null = null,
  param: string | null = null,
): OpenAiErrorBody {
  return { error: { message, type, param, code } };
}

/** An OpenAI error as a JSON response with `status` and extra `headers`. */
export function errorResponse(
  status: number,
  body: OpenAiErrorBody,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}
