/**
 * vLLM's `POST /v1/responses` as the fake serves it (dev/fake_engine/fake_engine.ts;
 * the fake SGLang does not): one assistant message of `output_text`, usage
 * in input and output tokens, and with `stream: true` the `response.*` SSE
 * events.
 *
 * @module
 */

import { promptBlocks } from "./fake_prefix_cache.ts";
import { approxTokens, prefill, sleep, textOf, token } from "./fake_engine_generation.ts";
import { apiError, checkModel, hexId, json, readBody } from "./fake_engine_http.ts";
import type { Runtime } from "./fake_engine_runtime.ts";
import { eventStream, sseEvent } from "./fake_engine_sse.ts";

/**
 * `POST /v1/responses` of vLLM (the fake SGLang does not serve it): one
 * assistant message of `output_text`, usage in input/output tokens, and with
 * `stream: true` the `response.*` SSE events (each with `event:` and
 * `data:` lines and no `[DONE]`, as vLLM and OpenAI send them).
 */
export async function responses(rt: Runtime, req: Request): Promise<Response> {
  const body = await readBody(req);
  if (body instanceof Response) return body;
  const model = checkModel(rt, body);
  if (model instanceof Response) return model;
  const input = body.input;
  if (typeof input !== "string" && !(Array.isArray(input) && input.length > 0)) {
    return apiError(
      400,
      "BadRequestError",
      "input: Field required (a string or a non-empty list of input items)",
      "input",
    );
  }
  const instructions = body.instructions ?? null;
  if (instructions !== null && typeof instructions !== "string") {
    return apiError(400, "BadRequestError", "instructions must be a string", "instructions");
  }
  const maxRaw = body.max_output_tokens ?? null;
  if (
    maxRaw !== null && (typeof maxRaw !== "number" || !Number.isInteger(maxRaw) || maxRaw < 1)
  ) {
    return apiError(
      400,
      "BadRequestError",
      "max_output_tokens must be a positive integer",
      "max_output_tokens",
    );
  }
  const count = Math.min(rt.knobs.tokens, maxRaw ?? Infinity);
  const status = count < rt.knobs.tokens ? "incomplete" : "completed";
  const inputTokens = approxTokens(textOf(input)) +
    (instructions === null ? 0 : approxTokens(instructions));
  const blocks = rt.cache === null ? null : promptBlocks(
    instructions === null ? textOf(input) : `${instructions} ${textOf(input)}`,
    rt.cache.blockTokens,
  );
  const held = inputTokens + count;
  const id = `resp_${hexId()}`;
  const itemId = `msg_${hexId()}`;
  const createdAt = Math.floor(Date.now() / 1000);
  const usage = {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: count,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: inputTokens + count,
  };
  const part = (text: string) => ({ type: "output_text", text, annotations: [] });
  const message = (text: string | null, itemStatus: string) => ({
    type: "message",
    id: itemId,
    status: itemStatus,
    role: "assistant",
    content: text === null ? [] : [part(text)],
  });
  const response = (
    state: string,
    output: unknown[],
    used: typeof usage | null,
  ) => ({
    id,
    object: "response",
    created_at: createdAt,
    model,
    status: state,
    incomplete_details: state === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions,
    max_output_tokens: maxRaw,
    output,
    parallel_tool_calls: true,
    temperature: null,
    top_p: null,
    tool_choice: "auto",
    tools: [],
    text: { format: { type: "text" } },
    error: null,
    metadata: {},
    usage: used,
  });
  const finished = () => {
    rt.sched.completed++;
    rt.sched.prompt_tokens += inputTokens;
    rt.onCompleted();
  };

  if (body.stream !== true) {
    const ticket = await rt.sched.acquire(held);
    let text = "";
    try {
      usage.input_tokens_details.cached_tokens = await prefill(rt, blocks, inputTokens);
      for (let i = 0; i < count; i++) {
        await sleep(rt.knobs.token_delay_ms);
        text += token(i);
        rt.sched.generation_tokens++;
      }
    } finally {
      rt.sched.release(ticket);
    }
    finished();
    return json(200, response(status, [message(text, status)], usage));
  }

  let sequence = 0;
  const event = (type: string, fields: Record<string, unknown>) =>
    sseEvent(type, { type, sequence_number: sequence++, ...fields });
  const at = { item_id: itemId, output_index: 0, content_index: 0 };
  return eventStream(async (out) => {
    const ticket = await rt.sched.acquire(held);
    try {
      usage.input_tokens_details.cached_tokens = await prefill(rt, blocks, inputTokens);
      if (out.cancelled) return;
      out.send(event("response.created", { response: response("in_progress", [], null) }));
      out.send(event("response.in_progress", { response: response("in_progress", [], null) }));
      out.send(
        event("response.output_item.added", {
          output_index: 0,
          item: message(null, "in_progress"),
        }),
      );
      out.send(event("response.content_part.added", { ...at, part: part("") }));
      let text = "";
      for (let i = 0; i < count; i++) {
        await sleep(rt.knobs.token_delay_ms);
        if (out.cancelled) return;
        rt.sched.generation_tokens++;
        text += token(i);
        out.send(event("response.output_text.delta", { ...at, delta: token(i), logprobs: [] }));
      }
      out.send(event("response.output_text.done", { ...at, text, logprobs: [] }));
      out.send(event("response.content_part.done", { ...at, part: part(text) }));
      out.send(
        event("response.output_item.done", { output_index: 0, item: message(text, status) }),
      );
      out.send(
        event(`response.${status}`, {
          response: response(status, [message(text, status)], usage),
        }),
      );
      out.close();
      finished();
    } catch {
      // The client went away (a send on a cancelled stream).
    } finally {
      rt.sched.release(ticket);
    }
  });
}
