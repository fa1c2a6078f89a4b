/**
 * The fake engine's `POST /v1/chat/completions` and `POST /v1/completions`
 * (dev/fake_engine/fake_engine.ts): OpenAI shapes, `n` choices, `max_tokens`, the
 * prefix cache's `cached_tokens`, and with `stream: true` one SSE chunk per
 * choice and token, a finish chunk, an optional usage chunk
 * (`stream_options.include_usage`) and `data: [DONE]`.
 *
 * @module
 */

import { promptBlocks } from "./fake_prefix_cache.ts";
import { approxTokens, prefill, sleep, textOf, token } from "./fake_engine_generation.ts";
import { apiError, checkModel, hexId, json, readBody } from "./fake_engine_http.ts";
import { checkRequest, validationError } from "./fake_engine_request.ts";
import type { Runtime } from "./fake_engine_runtime.ts";
import { eventStream, sseData, sseDone } from "./fake_engine_sse.ts";

/** The most choices (`n`) one request may ask for. */
export const MAX_CHOICES = 128;

/** Serves a chat (`messages`) or text (`prompt`) completion, plain or streamed. */
export async function completion(
  rt: Runtime,
  req: Request,
  kind: "chat" | "text",
): Promise<Response> {
  const raw = await readBody(req);
  if (raw instanceof Response) return raw;
  // Types and shapes first, as vLLM's pydantic models check them before any handler.
  const checked = checkRequest(raw, kind);
  if (!checked.ok) return validationError(checked.errors);
  const body = checked.body;
  const model = checkModel(rt, body);
  if (model instanceof Response) return model;
  let promptText: string;
  if (kind === "chat") {
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return apiError(
        400,
        "BadRequestError",
        "messages: Field required (a non-empty list)",
        "messages",
      );
    }
    promptText = textOf(body.messages);
  } else {
    const p = body.prompt;
    if (typeof p !== "string" && !Array.isArray(p)) {
      return apiError(400, "BadRequestError", "prompt: Field required (string or list)", "prompt");
    }
    promptText = textOf(p);
  }
  const maxRaw = body.max_completion_tokens ?? body.max_tokens;
  if (
    maxRaw !== undefined && maxRaw !== null &&
    (typeof maxRaw !== "number" || !Number.isInteger(maxRaw) || maxRaw < 1)
  ) {
    return apiError(400, "BadRequestError", "max_tokens must be a positive integer", "max_tokens");
  }
  const nRaw = body.n;
  if (
    nRaw !== undefined && nRaw !== null &&
    (typeof nRaw !== "number" || !Number.isInteger(nRaw) || nRaw < 1 || nRaw > MAX_CHOICES)
  ) {
    return apiError(
      400,
      "BadRequestError",
      `n must be an integer from 1 to ${MAX_CHOICES}, got ${JSON.stringify(nRaw)}`,
      "n",
    );
  }
  // n choices, as vLLM and SGLang generate them: each its own sequence (here the same words).
  const n = typeof nRaw === "number" ? nRaw : 1;
  const max = typeof maxRaw === "number" ? maxRaw : Infinity;
  const count = Math.min(rt.knobs.tokens, max);
  const finish = count < rt.knobs.tokens ? "length" : "stop";
  const promptTokens = approxTokens(promptText);
  // Token ids are cached as ids; anything else as the text the fake reads.
  const ids = kind === "text" && Array.isArray(body.prompt) && body.prompt.length > 0 &&
      body.prompt.every((x) => Number.isSafeInteger(x))
    ? body.prompt as number[]
    : null;
  const blocks = rt.cache === null ? null : promptBlocks(ids ?? promptText, rt.cache.blockTokens);
  // What the request holds in the KV cache while it runs: its prompt and every choice's output.
  const held = promptTokens + count * n;
  const id = `${kind === "chat" ? "chatcmpl" : "cmpl"}-${hexId()}`;
  const created = Math.floor(Date.now() / 1000);
  // With the prefix cache on, the cached part is reported as vLLM does
  // (`--enable-prompt-tokens-details`): usage.prompt_tokens_details.cached_tokens.
  const usage: {
    prompt_tokens: number;
    total_tokens: number;
    completion_tokens: number;
    prompt_tokens_details?: { cached_tokens: number };
  } = {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + count * n,
    completion_tokens: count * n,
  };
  const cachedUsage = (cached: number) => {
    if (rt.cache !== null) usage.prompt_tokens_details = { cached_tokens: cached };
  };
  const stream = body.stream === true;
  const includeUsage = stream &&
    (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;

  const finished = () => {
    rt.sched.completed++;
    rt.sched.prompt_tokens += promptTokens;
    rt.onCompleted();
  };

  if (!stream) {
    const ticket = await rt.sched.acquire(held);
    let text = "";
    try {
      cachedUsage(await prefill(rt, blocks, promptTokens));
      for (let i = 0; i < count; i++) {
        await sleep(rt.knobs.token_delay_ms);
        text += token(i);
        rt.sched.generation_tokens += n;
      }
    } finally {
      rt.sched.release(ticket);
    }
    const choice = (index: number) =>
      kind === "chat"
        ? {
          index,
          message: { role: "assistant", content: text, tool_calls: [] },
          logprobs: null,
          finish_reason: finish,
          stop_reason: null,
        }
        : { index, text, logprobs: null, finish_reason: finish, stop_reason: null };
    finished();
    return json(200, {
      id,
      object: kind === "chat" ? "chat.completion" : "text_completion",
      created,
      model,
      choices: Array.from({ length: n }, (_, index) => choice(index)),
      usage,
    });
  }

  const object = kind === "chat" ? "chat.completion.chunk" : "text_completion";
  const chunk = (choice: Record<string, unknown> | null, extra: Record<string, unknown> = {}) =>
    sseData({ id, object, created, model, choices: choice === null ? [] : [choice], ...extra });
  return eventStream(async (out) => {
    const ticket = await rt.sched.acquire(held);
    try {
      // The role chunk, like every chunk, comes after the prefill.
      cachedUsage(await prefill(rt, blocks, promptTokens));
      if (out.cancelled) return;
      // One chunk per choice and step, each naming its choice's index.
      if (kind === "chat") {
        for (let index = 0; index < n; index++) {
          out.send(
            chunk({
              index,
              delta: { role: "assistant", content: "" },
              logprobs: null,
              finish_reason: null,
            }),
          );
        }
      }
      for (let i = 0; i < count; i++) {
        await sleep(rt.knobs.token_delay_ms);
        if (out.cancelled) return;
        rt.sched.generation_tokens += n;
        for (let index = 0; index < n; index++) {
          out.send(
            chunk(
              kind === "chat"
                ? { index, delta: { content: token(i) }, logprobs: null, finish_reason: null }
                : { index, text: token(i), logprobs: null, finish_reason: null },
            ),
          );
        }
      }
      for (let index = 0; index < n; index++) {
        out.send(
          chunk(
            kind === "chat"
              ? { index, delta: {}, logprobs: null, finish_reason: finish, stop_reason: null }
              : { index, text: "", logprobs: null, finish_reason: finish, stop_reason: null },
          ),
        );
      }
      if (includeUsage) out.send(chunk(null, { usage }));
      out.send(sseDone());
      out.close();
      finished();
    } catch {
      // The client went away (a send on a cancelled stream).
    } finally {
      rt.sched.release(ticket);
    }
  });
}
