/**
 * The fake engine's HTTP answers in the engines' shapes (dev/fake_engine/fake_engine.ts):
 * JSON bodies, OpenAI-style errors, FastAPI's 404 and 405, and the checks
 * every OpenAI route makes on its request body.
 *
 * @module
 */

import type { Runtime } from "./fake_engine_runtime.ts";

/** A JSON response. */
export function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}

/** An OpenAI-style error body. */
export function apiError(
  status: number,
  type: string,
  message: string,
  param: string | null = null,
): Response {
  return json(status, { error: { message, type, param, code: status } });
}

/** FastAPI's answer for a path no route serves. */
export const NOT_FOUND = (): Response => json(404, { detail: "Not Found" });

/** FastAPI's answer for a method the path's routes do not take. */
export const NOT_ALLOWED = (): Response => json(405, { detail: "Method Not Allowed" });

/** A random 32-digit hex id, the part of response ids after `chatcmpl-`, `resp_`, …. */
export function hexId(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

/** Reads a JSON object body, or returns the 400 response to send. */
export async function readBody(req: Request): Promise<Record<string, unknown> | Response> {
  let text: string;
  try {
    text = await req.text();
  } catch (e) {
    return apiError(400, "BadRequestError", `could not read the request body: ${e}`);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (e) {
    return apiError(
      400,
      "BadRequestError",
      `JSON decode error: ${e instanceof Error ? e.message : e}`,
    );
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    return apiError(400, "BadRequestError", "the request body must be a JSON object");
  }
  return body as Record<string, unknown>;
}

/** The model a request names, or the 404 to send. Absent means the primary name (as vLLM does). */
export function checkModel(rt: Runtime, body: Record<string, unknown>): string | Response {
  const model = body.model;
  if (model === undefined || model === null) return rt.cfg.served_names[0];
  if (typeof model !== "string" || !rt.cfg.served_names.includes(model)) {
    return apiError(
      404,
      "NotFoundError",
      `The model \`${typeof model === "string" ? model : JSON.stringify(model)}\` does not exist.`,
      "model",
    );
  }
  return model;
}
