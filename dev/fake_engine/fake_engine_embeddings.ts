/**
 * The fake engine's `POST /v1/embeddings` (dev/fake_engine/fake_engine.ts):
 * deterministic 8-float unit vectors, as floats or base64.
 *
 * @module
 */

import { approxTokens } from "./fake_engine_generation.ts";
import { apiError, checkModel, hexId, json, readBody } from "./fake_engine_http.ts";
import type { Runtime } from "./fake_engine_runtime.ts";

const encoder = new TextEncoder();

/** A deterministic unit vector of 8 floats for a text. */
export function fakeEmbedding(text: string): number[] {
  // FNV-1a, then a xorshift stream.
  let h = 0x811c9dc5;
  for (const b of encoder.encode(text)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  const out: number[] = [];
  let x = h || 1;
  for (let i = 0; i < 8; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out.push((x / 0xffffffff) * 2 - 1);
  }
  const norm = Math.hypot(...out) || 1;
  return out.map((n) => Math.round((n / norm) * 1e6) / 1e6);
}

/** Serves an embeddings request: one vector per input string (a token-id list is one input). */
export async function embeddings(rt: Runtime, req: Request): Promise<Response> {
  const body = await readBody(req);
  if (body instanceof Response) return body;
  const model = checkModel(rt, body);
  if (model instanceof Response) return model;
  const input = body.input;
  let items: string[];
  if (typeof input === "string") items = [input];
  else if (Array.isArray(input) && input.length > 0) {
    items = input.every((x) => typeof x === "number")
      ? [input.join(" ")]
      : input.map((x) => (typeof x === "string" ? x : Array.isArray(x) ? x.join(" ") : ""));
  } else {
    return apiError(400, "BadRequestError", "input: Field required (string or list)", "input");
  }
  const base64 = body.encoding_format === "base64";
  let tokens = 0;
  const data = items.map((text, index) => {
    tokens += approxTokens(text);
    const vec = fakeEmbedding(text);
    const embedding = base64
      ? btoa(String.fromCharCode(...new Uint8Array(new Float32Array(vec).buffer)))
      : vec;
    return { object: "embedding", index, embedding };
  });
  return json(200, {
    id: `embd-${hexId()}`,
    object: "list",
    created: Math.floor(Date.now() / 1000),
    model,
    data,
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 },
  });
}
