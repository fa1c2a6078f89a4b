/**
 * A request routed by model (design §12): its body read with a size limit
 * (413 beyond it), parsed as a JSON object, and its `model` taken out (400
 * when any of that fails). The bytes go on to the engine as they came.
 *
 * @module
 */
import { readLimited } from "../http/read_limited.ts";
import { invalidRequest, tooLarge } from "./refusals.ts";

/** Default request body limit: 10 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024;

/** The body was larger than the limit. */
export class BodyTooLarge extends Error {
  /** Creates the error for `limit` bytes. */
  constructor(readonly limit: number) {
    super(`request body is larger than ${limit} bytes`);
    this.name = "BodyTooLarge";
  }
}

/**
 * Reads `req`'s body into memory, refusing (with {@link BodyTooLarge}) a
 * declared `Content-Length` above `limit` before reading, and stopping as soon
 * as more than `limit` bytes arrived otherwise.
 */
export async function readBodyLimited(
  req: Request,
  limit: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const declared = Number(req.headers.get("content-length") ?? NaN);
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLarge(limit);
  if (req.body === null) return new Uint8Array(0);
  // A declared length within the limit: one native read (the hot path).
  if (Number.isFinite(declared)) return new Uint8Array(await req.arrayBuffer());
  const bytes = await readLimited(req.body, limit);
  if (bytes === null) throw new BodyTooLarge(limit);
  return bytes;
}

/** A request body that names a model. */
export interface ModelRequest {
  /** The body as it came, for the engine. */
  bytes: Uint8Array<ArrayBuffer>;
  /** The body parsed (the affinity key reads its messages). */
  body: Record<string, unknown>;
  /** The served model name it asks for (not empty). */
  model: string;
}

const decoder = new TextDecoder();

/** Reads `req`'s body as a {@link ModelRequest}, or the 400/413 answer refusing it. */
export async function readModelRequest(
  req: Request,
  maxBodyBytes: number,
): Promise<ModelRequest | Response> {
  let bytes: Uint8Array<ArrayBuffer>;
  try {
    bytes = await readBodyLimited(req, maxBodyBytes);
  } catch (e) {
    if (e instanceof BodyTooLarge) return tooLarge(e.message);
    return invalidRequest("could not read the request body");
  }
  let body: unknown;
  try {
    body = JSON.parse(decoder.decode(bytes));
  } catch {
    return invalidRequest("the request body is not valid JSON", null, "invalid_json");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return invalidRequest("the request body must be a JSON object", null, "invalid_json");
  }
  const model = (body as Record<string, unknown>).model;
  if (typeof model !== "string" || model === "") {
    return invalidRequest("you must provide a model parameter", "model", "missing_model");
  }
  return { bytes, body: body as Record<string, unknown>, model };
}
